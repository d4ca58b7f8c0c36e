//! What a build needs to know of a Dockerfile before Docker reads it: the build arguments it
//! declares (only those of the service's variables are passed) and every image the build may
//! make the daemon pull (each pulled first, through the outbound policy).
//!
//! The text is read the way Docker's parser reads it (parser directives, the escape character,
//! continuation lines, builder flags, `${...}` substitution): wherever Capstan and Docker read
//! a line differently, the daemon could pull an image Capstan never checked. What cannot be
//! read for sure is refused rather than guessed at.

use std::collections::{BTreeMap, BTreeSet};

/// The escape character when no `# escape=` directive names another.
const DEFAULT_ESCAPE: char = '\\';
/// The parser directives Docker knows (any other line ends them).
const DIRECTIVES: [&str; 3] = ["syntax", "escape", "check"];
/// The build arguments Docker's classic builder gives FROM even when no ARG declares them.
const PROXY_ARGS: [&str; 10] = [
    "HTTP_PROXY",
    "http_proxy",
    "HTTPS_PROXY",
    "https_proxy",
    "FTP_PROXY",
    "ftp_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
];
/// How much of an instruction a refusal quotes.
const QUOTED: usize = 80;

/// The global ARGs as Docker gives them to FROM: a value, none (declared without a default
/// and not passed), or why Capstan cannot tell.
type Scope = BTreeMap<String, Result<Option<String>, String>>;

/// The escape character the directives set, and why they cannot be accepted.
#[derive(Debug)]
struct Directives {
    escape: char,
    refused: Option<String>,
    /// The BuildKit frontend image a `# syntax` directive names.
    frontend: Option<String>,
}

/// One instruction as Docker's parser makes it: its lines joined, its builder flags apart.
#[derive(Debug)]
struct Instruction {
    keyword: String,
    flags: Vec<String>,
    args: String,
    line: usize,
    text: String,
}

impl Instruction {
    fn new(joined: &str, line: usize) -> Self {
        let text = joined.trim();
        let (keyword, rest) = text.split_once(token_space).unwrap_or((text, ""));
        let (args, flags) = builder_flags(rest.trim_start_matches(token_space));
        Self {
            keyword: keyword.to_ascii_uppercase(),
            flags,
            args: args.trim().to_string(),
            line,
            text: text.to_string(),
        }
    }

    /// The instruction as a refusal names it: as written, so no build argument's value.
    fn at(&self) -> String {
        let mut quoted: String = self.text.chars().take(QUOTED).collect();
        if quoted.len() < self.text.len() {
            quoted.push('…');
        }
        format!("{quoted} (line {})", self.line)
    }

    /// The values of the flag `--{name}=...` (flag names read case-insensitively).
    fn flag_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.flags.iter().filter_map(move |flag| {
            let (key, value) = flag.strip_prefix("--")?.split_once('=')?;
            key.eq_ignore_ascii_case(name).then_some(value)
        })
    }
}

/// The directives at the top and the instructions, as Docker reads them.
#[derive(Debug)]
struct Dockerfile {
    directives: Directives,
    instructions: Vec<Instruction>,
}

/// The separators Docker splits an instruction's words on.
fn token_space(c: char) -> bool {
    matches!(c, '\t' | '\u{b}' | '\u{c}' | '\r' | ' ')
}

fn parse(text: &str) -> Dockerfile {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.trim_end_matches(['\r', '\n']))
        .collect();
    let directives = directives(&lines);
    let instructions = instructions(&lines, directives.escape);
    Dockerfile {
        directives,
        instructions,
    }
}

/// `# key=value`, the key in lower case, when the line has that shape.
fn directive(line: &str) -> Option<(String, &str)> {
    let rest = line.strip_prefix('#')?.trim_start_matches([' ', '\t']);
    let end = rest
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(rest.len());
    let (key, rest) = rest.split_at(end);
    if !key.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    let value = rest
        .trim_start_matches([' ', '\t'])
        .strip_prefix('=')?
        .trim_matches([' ', '\t']);
    (!value.is_empty()).then(|| (key.to_ascii_lowercase(), value))
}

/// Docker reads directives only at the very top: the first line of another shape (an
/// instruction, a comment, a blank line, an unknown key) ends them.
fn directives(lines: &[&str]) -> Directives {
    let mut found = Directives {
        escape: DEFAULT_ESCAPE,
        refused: None,
        frontend: None,
    };
    let mut seen: Vec<String> = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let Some((key, value)) = directive(line.trim_start()) else {
            break;
        };
        if !DIRECTIVES.contains(&key.as_str()) {
            break;
        }
        if key == "syntax" {
            found.frontend = Some(value.to_string());
        }
        let refused = refusal_of_directive(&key, value, index + 1, &seen, &mut found.escape);
        found.refused = found.refused.take().or(refused);
        seen.push(key);
    }
    found
}

/// Why a directive cannot be accepted; sets the escape character it names.
fn refusal_of_directive(
    key: &str,
    value: &str,
    line: usize,
    seen: &[String],
    escape: &mut char,
) -> Option<String> {
    if seen.iter().any(|k| k == key) {
        return Some(format!(
            "it has more than one # {key} directive (line {line})"
        ));
    }
    match key {
        // The classic builder Capstan builds with reads no frontend, but the image must still
        // be one the outbound policy allows (a builder that reads it would pull it).
        "syntax" if value.is_empty() || value.contains(['$', ' ', '\t']) => Some(format!(
            "its # syntax directive (line {line}) does not name one image"
        )),
        "syntax" => None,
        // Docker 20.10 ends its directives at `# check`, newer versions read on: an escape
        // directive after it would change the continuation lines for some daemons only.
        "escape" if seen.iter().any(|k| k == "check") => Some(format!(
            "its # escape directive (line {line}) follows a # check directive, and Docker \
             versions disagree on whether it is then a directive or a comment: put it first"
        )),
        "escape" => match value {
            "`" | "\\" => {
                *escape = value.chars().next().unwrap_or(DEFAULT_ESCAPE);
                None
            }
            _ => Some(format!(
                "its # escape directive (line {line}) names neither ` nor \\"
            )),
        },
        _ => None,
    }
}

/// Whether Docker takes the line (its leading whitespace aside) for a comment.
fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// The line without its continuation (the escape character last, then spaces or tabs), and
/// whether the instruction ends with it.
fn continued(line: &str, escape: char) -> (&str, bool) {
    match line.trim_end_matches([' ', '\t']).strip_suffix(escape) {
        Some(rest) => (rest, false),
        None => (line, true),
    }
}

/// Docker's joining of lines: a comment or blank line inside a continuation is skipped, the
/// continued lines are appended as they are (their leading whitespace kept).
fn instructions(lines: &[&str], escape: char) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut next = 0;
    while let Some(first) = lines.get(next) {
        let start = next + 1;
        next += 1;
        let first = first.trim_start();
        if first.starts_with('#') {
            continue;
        }
        let (part, mut ended) = continued(first, escape);
        if ended && part.is_empty() {
            continue;
        }
        let mut joined = part.to_string();
        while !ended {
            let Some(line) = lines.get(next) else { break };
            next += 1;
            if is_comment(line) || line.trim_start().is_empty() {
                continue;
            }
            let (part, end) = continued(line, escape);
            joined.push_str(part);
            ended = end;
        }
        out.push(Instruction::new(&joined, start));
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Phase {
    Spaces,
    Word,
    Quoted(char),
}

/// Docker's builder flags: the leading words that start with `--` (quotes and backslashes
/// read as Docker reads them there); the rest of the line.
fn builder_flags(line: &str) -> (&str, Vec<String>) {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let mut flags = Vec::new();
    let (mut word, mut blank_ok, mut phase) = (String::new(), false, Phase::Spaces);
    let mut i = 0;
    while let Some(&(at, c)) = chars.get(i) {
        match phase {
            Phase::Spaces if c.is_whitespace() => {}
            Phase::Spaces => {
                let dashes = c == '-' && chars.get(i + 1).is_some_and(|&(_, n)| n == '-');
                if !dashes {
                    return (&line[at..], flags);
                }
                phase = Phase::Word;
                continue;
            }
            Phase::Word if c.is_whitespace() => {
                if word == "--" {
                    return (&line[at..], flags);
                }
                if blank_ok || !word.is_empty() {
                    flags.push(std::mem::take(&mut word));
                }
                (blank_ok, phase) = (false, Phase::Spaces);
            }
            Phase::Word if c == '\'' || c == '"' => (blank_ok, phase) = (true, Phase::Quoted(c)),
            Phase::Quoted(q) if c == q => phase = Phase::Word,
            Phase::Word | Phase::Quoted(_) if c == '\\' => match chars.get(i + 1) {
                Some(&(_, escaped)) => {
                    word.push(escaped);
                    i += 1;
                }
                None if phase != Phase::Word => phase = Phase::Word,
                None => {}
            },
            Phase::Word | Phase::Quoted(_) => word.push(c),
        }
        i += 1;
    }
    if phase != Phase::Spaces && word != "--" && (blank_ok || !word.is_empty()) {
        flags.push(word);
    }
    ("", flags)
}

/// Docker's words of an ARG: split on whitespace outside quotes, quotes and escapes kept.
fn words(rest: &str, escape: char) -> Vec<String> {
    let chars: Vec<char> = rest.chars().collect();
    let mut out = Vec::new();
    let (mut word, mut blank_ok, mut phase) = (String::new(), false, Phase::Spaces);
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        i += 1;
        match phase {
            Phase::Spaces if c.is_whitespace() => continue,
            Phase::Spaces => phase = Phase::Word,
            _ => {}
        }
        match phase {
            Phase::Word if c.is_whitespace() => {
                if blank_ok || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                (blank_ok, phase) = (false, Phase::Spaces);
                continue;
            }
            Phase::Word if c == '\'' || c == '"' => (blank_ok, phase) = (true, Phase::Quoted(c)),
            Phase::Quoted(q) if c == q => phase = Phase::Word,
            Phase::Quoted(q) if c == escape && q != '\'' && i == chars.len() => {
                phase = Phase::Word;
                continue;
            }
            Phase::Word if c == escape && i == chars.len() => continue,
            Phase::Word | Phase::Quoted('"') if c == escape => {
                word.push(c);
                if let Some(&escaped) = chars.get(i) {
                    word.push(escaped);
                    i += 1;
                }
                continue;
            }
            _ => {}
        }
        word.push(c);
    }
    if phase != Phase::Spaces && (blank_ok || !word.is_empty()) {
        out.push(word);
    }
    out
}

/// Docker's substitution of build arguments in a word, for the forms whose result Capstan is
/// sure of: `$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME:+word}`, and quotes. The escape
/// character is refused (rare in image names, and Docker's rules for it differ by context).
struct Substitution<'a> {
    chars: Vec<char>,
    at: usize,
    escape: char,
    scope: &'a Scope,
}

impl<'a> Substitution<'a> {
    fn of(word: &str, escape: char, scope: &'a Scope) -> Result<String, String> {
        let mut s = Substitution {
            chars: word.chars().collect(),
            at: 0,
            escape,
            scope,
        };
        s.word(None)
    }

    fn next(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied();
        self.at += 1;
        c
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn escaped(&self) -> String {
        format!(
            "it uses the escape character {}, which Capstan does not resolve there",
            self.escape
        )
    }

    fn word(&mut self, stop: Option<char>) -> Result<String, String> {
        let mut out = String::new();
        loop {
            match self.next() {
                None if stop.is_some() => return Err("a ${ is not closed".into()),
                None => return Ok(out),
                Some(c) if Some(c) == stop => return Ok(out),
                Some('\'') => out.push_str(&self.single_quoted()?),
                Some('"') => out.push_str(&self.double_quoted()?),
                Some('$') => out.push_str(&self.dollar()?),
                Some(c) if c == self.escape => return Err(self.escaped()),
                Some(c) => out.push(c),
            }
        }
    }

    fn single_quoted(&mut self) -> Result<String, String> {
        let mut out = String::new();
        loop {
            match self.next() {
                None => return Err("a quote is not closed".into()),
                Some('\'') => return Ok(out),
                Some(c) => out.push(c),
            }
        }
    }

    fn double_quoted(&mut self) -> Result<String, String> {
        let mut out = String::new();
        loop {
            match self.next() {
                None => return Err("a quote is not closed".into()),
                Some('"') => return Ok(out),
                Some('$') => out.push_str(&self.dollar()?),
                Some(c) if c == self.escape => return Err(self.escaped()),
                Some(c) => out.push(c),
            }
        }
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        if !self
            .peek()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        {
            return name;
        }
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        {
            name.push(c);
            self.at += 1;
        }
        name
    }

    fn dollar(&mut self) -> Result<String, String> {
        let unsupported = "it uses a form of substitution Capstan does not resolve (only $NAME, \
                           ${NAME}, ${NAME:-default} and ${NAME:+value})";
        if self.peek() != Some('{') {
            let name = self.name();
            if !name.is_empty() {
                return self.value(&name);
            }
            // A digit or a special parameter ($1, $@...): its value is no build argument's.
            return match self.peek() {
                Some(c) if c.is_ascii_digit() || "@*#?-$!".contains(c) => Err(unsupported.into()),
                _ => Ok("$".into()),
            };
        }
        self.at += 1;
        let name = self.name();
        if name.is_empty() {
            return Err(unsupported.into());
        }
        match self.next() {
            Some('}') => self.value(&name),
            None => Err("a ${ is not closed".into()),
            Some(':') => match self.next() {
                Some(modifier @ ('-' | '+')) => self.modified(&name, modifier),
                _ => Err(unsupported.into()),
            },
            _ => Err(unsupported.into()),
        }
    }

    /// `${NAME:-word}`: the word when NAME is empty; `${NAME:+word}`: the word when it is not.
    fn modified(&mut self, name: &str, modifier: char) -> Result<String, String> {
        let word = self.word(Some('}'))?;
        let value = self.value(name)?;
        Ok(match (modifier, value.is_empty()) {
            ('-', true) | ('+', false) => word,
            ('-', false) => value,
            _ => String::new(),
        })
    }

    fn value(&self, name: &str) -> Result<String, String> {
        match self.scope.get(name) {
            Some(Ok(value)) => Ok(value.clone().unwrap_or_default()),
            Some(Err(why)) => Err(why.clone()),
            None if PROXY_ARGS.contains(&name) => Err(format!(
                "it uses {name}, which Docker may fill from the proxy settings: declare it \
                 with an ARG before the first FROM"
            )),
            // Docker leaves it empty: only the ARGs before the first FROM reach FROM.
            None => Ok(String::new()),
        }
    }
}

/// Declares the ARGs of an instruction before the first FROM.
fn declare(
    scope: &mut Scope,
    instruction: &Instruction,
    escape: char,
    passed: &BTreeMap<String, String>,
) {
    for word in words(&instruction.args, escape) {
        let (name, default) = match word.split_once('=') {
            Some((name, default)) => (name, Some(default)),
            None => (word.as_str(), None),
        };
        let value = match (passed.get(name), default) {
            (Some(value), _) => Ok(Some(value.clone())),
            (None, Some(default)) => default_value(name, default, instruction, escape, scope),
            (None, None) => Ok(None),
        };
        scope.insert(name.to_string(), value);
    }
}

/// An ARG's default as Docker gives it: substituted with the ARGs before it.
fn default_value(
    name: &str,
    default: &str,
    instruction: &Instruction,
    escape: char,
    scope: &Scope,
) -> Result<Option<String>, String> {
    Substitution::of(default, escape, scope)
        .map(Some)
        .map_err(|why| {
            let at = instruction.at();
            format!("the default of the build argument {name} ({at}) cannot be resolved: {why}")
        })
}

/// Why a name is no image reference Capstan can check (its value is never quoted: it may be
/// a build argument's).
fn unreadable(image: &str) -> Option<&'static str> {
    if image.is_empty() {
        Some("it names no image")
    } else if image.contains('$') {
        Some("its image name still holds a $ once the build arguments are substituted")
    } else if !image
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-:/@".contains(c))
    {
        Some("its image name is not a plain image reference")
    } else {
        None
    }
}

/// The stages a new stage starts after: their names (lower case), unnamed ones `None`.
type Stages = Vec<Option<String>>;

/// The image a FROM pulls (none for `scratch` or an earlier stage), and its stage's name.
fn from(
    instruction: &Instruction,
    escape: char,
    scope: &Scope,
    earlier: &[Option<String>],
) -> Result<(Option<String>, Option<String>), String> {
    let at = instruction.at();
    let words: Vec<&str> = instruction
        .args
        .split(token_space)
        .filter(|w| !w.is_empty())
        .collect();
    let (word, name) = match words.as_slice() {
        [image] => (*image, None),
        [image, as_word, name] if as_word.eq_ignore_ascii_case("as") => {
            (*image, Some(name.to_ascii_lowercase()))
        }
        _ => {
            return Err(format!(
                "{at}: FROM takes an image, then optionally AS and a stage name"
            ))
        }
    };
    let image = Substitution::of(word, escape, scope).map_err(|why| format!("{at}: {why}"))?;
    if let Some(why) = unreadable(&image) {
        return Err(format!("{at}: {why}"));
    }
    let lower = image.to_ascii_lowercase();
    let stage = earlier.iter().any(|s| s.as_deref() == Some(lower.as_str()));
    let pulled = (!stage && lower != "scratch").then_some(image);
    Ok((pulled, name))
}

/// The image a `--from` names (none for `scratch` or an earlier stage, by name or index).
fn source(
    value: &str,
    instruction: &Instruction,
    earlier: &[Option<String>],
) -> Result<Option<String>, String> {
    let at = instruction.at();
    if value.is_empty() {
        return Ok(None);
    }
    // Docker's classic builder reads --from as written, BuildKit substitutes it: which one
    // builds decides what is pulled, so neither reading is assumed.
    if value.contains('$') {
        return Err(format!(
            "{at}: it names the image or stage it takes files from with a $; Capstan checks \
             only an image or a stage named as written there"
        ));
    }
    let lower = value.to_ascii_lowercase();
    if lower == "scratch" || earlier.iter().any(|s| s.as_deref() == Some(lower.as_str())) {
        return Ok(None);
    }
    if let Ok(index) = value.parse::<i64>() {
        return match usize::try_from(index) {
            Ok(index) if index < earlier.len() => Ok(None),
            _ => Err(format!("{at}: there is no earlier stage {index}")),
        };
    }
    match unreadable(value) {
        Some(why) => Err(format!("{at}: {why}")),
        None => Ok(Some(value.to_string())),
    }
}

/// The fields of a `--mount` value, read as the CSV record Docker reads it as.
fn mount_fields(value: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut chars = value.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => break,
                    c => field.push(c),
                }
            }
            if !matches!(chars.peek(), None | Some(',')) {
                return None;
            }
        } else {
            while let Some(&c) = chars.peek().filter(|c| **c != ',') {
                if c == '"' {
                    return None;
                }
                field.push(c);
                chars.next();
            }
        }
        fields.push(field);
        if chars.next().is_none() {
            return Some(fields);
        }
    }
}

/// The `from=` of each `--mount` of a RUN.
fn mounted_sources(instruction: &Instruction) -> Result<Vec<String>, String> {
    let mut sources = Vec::new();
    for mount in instruction.flag_values("mount") {
        let fields = mount_fields(mount).ok_or_else(|| {
            format!(
                "{}: its --mount cannot be read (a quote out of place)",
                instruction.at()
            )
        })?;
        sources.extend(fields.iter().filter_map(|field| {
            let (key, value) = field.split_once('=')?;
            key.trim()
                .eq_ignore_ascii_case("from")
                .then(|| value.to_string())
        }));
    }
    Ok(sources)
}

/// The images a COPY or RUN takes files from.
fn taken_from(
    instruction: &Instruction,
    earlier: &[Option<String>],
) -> Result<Vec<String>, String> {
    let sources: Vec<String> = match instruction.keyword.as_str() {
        "COPY" => instruction
            .flag_values("from")
            .map(str::to_string)
            .collect(),
        "RUN" => mounted_sources(instruction)?,
        _ => Vec::new(),
    };
    let mut images = Vec::new();
    for value in sources {
        images.extend(source(&value, instruction, earlier)?);
    }
    Ok(images)
}

/// An ONBUILD that would take files from an image runs in a later build (one that starts from
/// the image built), where Capstan does not see it.
fn check_onbuild(instruction: &Instruction) -> Result<(), String> {
    let inner = Instruction::new(&instruction.args, instruction.line);
    let pulls = match inner.keyword.as_str() {
        "COPY" => inner.flag_values("from").any(|v| !v.is_empty()),
        "RUN" => !mounted_sources(&inner)?.is_empty(),
        _ => false,
    };
    if pulls {
        return Err(format!(
            "{}: it would make a later build, which Capstan cannot check, take files from \
             another image or stage",
            instruction.at()
        ));
    }
    Ok(())
}

/// Every image the build of `text` may make the daemon pull, given the build arguments
/// Capstan passes: each FROM's image (its build arguments substituted as Docker does), each
/// `COPY --from` and `RUN --mount=...,from=` that names no earlier stage; `scratch` and the
/// stages left out. `Err` says, naming the instruction (never a build argument's value), why
/// the Dockerfile cannot be checked.
pub fn pulled_images(
    text: &str,
    build_args: &BTreeMap<String, String>,
) -> Result<Vec<String>, String> {
    let file = parse(text);
    if let Some(why) = file.directives.refused {
        return Err(why);
    }
    let escape = file.directives.escape;
    let mut globals = Scope::new();
    let mut stages: Stages = Vec::new();
    let mut images: Vec<String> = Vec::new();
    for instruction in &file.instructions {
        // Docker's current stage is no earlier stage until the next FROM.
        let earlier = &stages[..stages.len().saturating_sub(1)];
        let found = match instruction.keyword.as_str() {
            "ARG" if stages.is_empty() => {
                declare(&mut globals, instruction, escape, build_args);
                Vec::new()
            }
            "FROM" => {
                let (image, name) = from(instruction, escape, &globals, &stages)?;
                stages.push(name);
                image.into_iter().collect()
            }
            "ONBUILD" => {
                check_onbuild(instruction)?;
                Vec::new()
            }
            _ => taken_from(instruction, earlier)?,
        };
        for image in found {
            if !images.contains(&image) {
                images.push(image);
            }
        }
    }
    Ok(images)
}

/// The sources of an `ADD` (every word but its destination), in shell or JSON form.
fn add_sources(instruction: &Instruction, escape: char) -> Vec<String> {
    let args = instruction.args.trim();
    let words = match serde_json::from_str::<Vec<String>>(args) {
        Ok(json) if args.starts_with('[') => json,
        _ => words(args, escape),
    };
    let count = words.len().saturating_sub(1);
    words.into_iter().take(count).collect()
}

/// Every URL the build of `text` makes the daemon fetch: each `ADD` source that is an
/// `http://` or `https://` URL. `Err` names (as written) an `ADD` Capstan cannot check: a
/// source made of variables (it may become a URL only at build time), or one in an `ONBUILD`
/// (a later build's, which Capstan does not see).
pub fn fetched_urls(text: &str) -> Result<Vec<String>, String> {
    let file = parse(text);
    let escape = file.directives.escape;
    let mut urls = Vec::new();
    for instruction in &file.instructions {
        let inner;
        let (add, later) = match instruction.keyword.as_str() {
            "ADD" => (instruction, false),
            "ONBUILD" => {
                inner = Instruction::new(&instruction.args, instruction.line);
                (&inner, true)
            }
            _ => continue,
        };
        if add.keyword != "ADD" {
            continue;
        }
        for source in add_sources(add, escape) {
            let lower = source.to_ascii_lowercase();
            let remote = lower.starts_with("http://") || lower.starts_with("https://");
            if source.contains('$') {
                return Err(format!(
                    "{}: its source is made of variables, which may name a URL the daemon \
                     would fetch past the outbound policy; name it as written (COPY for the \
                     repository's files)",
                    instruction.at()
                ));
            }
            if remote && later {
                return Err(format!(
                    "{}: it would make a later build, which Capstan cannot check, fetch a URL",
                    instruction.at()
                ));
            }
            if remote && !urls.contains(&source) {
                urls.push(source);
            }
        }
    }
    Ok(urls)
}

/// The host (without its port) a URL names.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => host.split(':').next()?,
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The BuildKit frontend image a `# syntax` directive names, if any: the classic builder
/// Capstan builds with pulls none, but it is checked against the outbound policy all the same.
pub fn frontend_image(text: &str) -> Option<String> {
    parse(text).directives.frontend
}

/// The names every `ARG` declares.
pub fn declared_args(text: &str) -> BTreeSet<String> {
    let file = parse(text);
    file.instructions
        .iter()
        .filter(|i| i.keyword == "ARG")
        .flat_map(|i| words(&i.args, file.directives.escape))
        .filter_map(|word| word.split('=').next().map(str::to_string))
        .filter(|name| !name.is_empty())
        .collect()
}

/// The images the stages start from as written: neither an earlier stage, nor `scratch`, nor
/// a name made of build arguments (what the API shows; a build checks [`pulled_images`]).
pub fn base_images(text: &str) -> Vec<String> {
    let mut stages: BTreeSet<String> = BTreeSet::new();
    let mut images: Vec<String> = Vec::new();
    for instruction in parse(text).instructions {
        if instruction.keyword != "FROM" {
            continue;
        }
        let words: Vec<&str> = instruction.args.split_whitespace().collect();
        let Some(image) = words.first() else { continue };
        let stage = stages.contains(&image.to_ascii_lowercase());
        if let [_, as_word, name] = words.as_slice() {
            if as_word.eq_ignore_ascii_case("as") {
                stages.insert(name.to_ascii_lowercase());
            }
        }
        if !stage
            && !image.eq_ignore_ascii_case("scratch")
            && !image.contains('$')
            && !images.iter().any(|i| i == image)
        {
            images.push((*image).to_string());
        }
    }
    images
}

#[cfg(test)]
mod tests {
    use super::*;

    const MULTI: &str = "\
# syntax=docker/dockerfile:1
ARG BASE=alpine
FROM --platform=linux/amd64 golang:1.22 AS build
ARG VERSION \\
    COMMIT=none
arg lower=1
RUN echo $VERSION
FROM build AS test
FROM scratch
FROM ${BASE}:3
COPY --from=build /out /app
FROM registry.local:5000/team/base:1 as final
";

    const LOCAL: &str = "127.0.0.1:5999/x";

    #[test]
    fn an_add_from_a_url_is_fetched_and_one_made_of_variables_refused() {
        let text = "FROM x\nADD http://127.0.0.1:5999/a.tgz /a\n\
                    ADD [\"HTTPS://example.com/b\", \"/b\"]\nADD local.txt other.txt /c/\n";
        assert_eq!(
            fetched_urls(text).unwrap(),
            ["http://127.0.0.1:5999/a.tgz", "HTTPS://example.com/b"]
        );
        for refused in [
            "FROM x\nARG U=http://127.0.0.1/x\nADD $U /x\n",
            "FROM x\nENV U=http://127.0.0.1/x\nADD ${U} /x\n",
            "FROM x\nONBUILD ADD http://127.0.0.1/x /x\n",
        ] {
            assert!(fetched_urls(refused).is_err(), "{refused}");
        }
        assert!(fetched_urls("FROM x\nADD . /app\nONBUILD ADD . /x\n")
            .unwrap()
            .is_empty());
        assert_eq!(url_host("http://u:p@[::1]:80/x").as_deref(), Some("::1"));
        assert_eq!(
            url_host("https://Example.com:8443?x").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("http:///x"), None);
    }

    fn none() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn passing(name: &str, value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(name.to_string(), value.to_string())])
    }

    fn pulled(text: &str) -> Vec<String> {
        pulled_images(text, &none()).unwrap()
    }

    fn refused(text: &str) -> String {
        pulled_images(text, &none()).unwrap_err()
    }

    #[test]
    fn every_declared_argument_is_found() {
        let args: Vec<String> = declared_args(MULTI).into_iter().collect();
        assert_eq!(args, ["BASE", "COMMIT", "VERSION", "lower"]);
        let quoted: Vec<String> = declared_args("ARG A=\"x y\" B\nFROM a\n")
            .into_iter()
            .collect();
        assert_eq!(quoted, ["A", "B"]);
        let escaped: Vec<String> = declared_args("# escape=`\nARG A `\n  B=1\nFROM a\n")
            .into_iter()
            .collect();
        assert_eq!(
            escaped,
            ["A", "B"],
            "continued with the escape directive's character"
        );
    }

    #[test]
    fn base_images_leave_out_stages_scratch_and_arguments() {
        assert_eq!(
            base_images(MULTI),
            ["golang:1.22", "registry.local:5000/team/base:1"]
        );
        assert_eq!(base_images("FROM busybox\nFROM busybox\n"), ["busybox"]);
    }

    #[test]
    fn stages_by_name_or_index_and_scratch_are_not_pulled() {
        let text = "\
FROM golang:1.22 AS Build
FROM build AS test
FROM SCRATCH
FROM alpine:3
COPY --from=BUILD /out /app
COPY --from=0 /x /y
COPY --from= /x /y
COPY --from=scratch /x /y
COPY --chown=1 --from=busybox:1 /bin/sh /sh
RUN --mount=type=cache,from=test,target=/c true
FROM alpine:3
";
        assert_eq!(pulled(text), ["golang:1.22", "alpine:3", "busybox:1"]);
    }

    #[test]
    fn a_stage_is_no_earlier_stage_within_itself() {
        assert_eq!(
            pulled("FROM alpine AS me\nCOPY --from=me /a /b\n"),
            ["alpine", "me"]
        );
        let reason = refused("FROM alpine\nFROM busybox\nCOPY --from=1 /a /b\n");
        assert!(reason.contains("no earlier stage 1"), "{reason}");
        assert!(reason.contains("COPY --from=1 /a /b (line 3)"), "{reason}");
    }

    #[test]
    fn a_from_named_by_a_global_argument_is_resolved() {
        let text = format!("ARG BASE={LOCAL}\nFROM ${{BASE}}\nFROM $BASE AS b\n");
        assert_eq!(pulled(&text), [LOCAL]);
        assert_eq!(
            pulled("ARG REG=127.0.0.1:5999\nARG IMAGE=\"${REG}/x\"\nFROM $IMAGE:1\n"),
            ["127.0.0.1:5999/x:1"],
            "a default built of an earlier argument, its quotes removed"
        );
    }

    #[test]
    fn defaults_and_alternatives_follow_docker() {
        let text = "\
ARG TAG
ARG SET=1
FROM alpine:${TAG:-3.19}
FROM busybox${TAG:+-tagged}
FROM debian:${SET:+12}
FROM ubuntu${UNDECLARED}:24.04
";
        assert_eq!(
            pulled(text),
            ["alpine:3.19", "busybox", "debian:12", "ubuntu:24.04"]
        );
    }

    #[test]
    fn a_passed_build_argument_overrides_the_default() {
        let text = "ARG BASE=alpine\nFROM ${BASE}\n";
        assert_eq!(
            pulled_images(text, &passing("BASE", LOCAL)).unwrap(),
            [LOCAL]
        );
        let text = "ARG REG=registry.example\nARG IMAGE=${REG}/app\nFROM ${IMAGE}\n";
        assert_eq!(
            pulled_images(text, &passing("REG", "127.0.0.1:5999")).unwrap(),
            ["127.0.0.1:5999/app"]
        );
    }

    #[test]
    fn an_argument_of_a_stage_does_not_reach_from() {
        let text = format!("FROM alpine\nARG BASE={LOCAL}\nFROM busybox${{BASE}}\n");
        assert_eq!(pulled(&text), ["alpine", "busybox"]);
        assert_eq!(
            pulled_images(&text, &passing("BASE", LOCAL)).unwrap(),
            ["alpine", "busybox"],
            "passed, it is still no global argument"
        );
    }

    #[test]
    fn copy_from_and_mount_from_are_pulled() {
        let text = format!(
            "FROM alpine AS a\n\
             COPY --from={LOCAL} /a /b\n\
             COPY --from=\"127.0.0.1:5999/quoted\" /a /b\n\
             RUN --mount=type=bind,from=127.0.0.1:5999/bind,target=/m true\n\
             RUN --network=none --mount=from=127.0.0.1:5999/short true\n\
             RUN --mount=type=cache,\"from=127.0.0.1:5999/csv\",target=/c true\n\
             RUN --mount=type=bind,from=a,target=/m true\n"
        );
        assert_eq!(
            pulled(&text),
            [
                "alpine",
                LOCAL,
                "127.0.0.1:5999/quoted",
                "127.0.0.1:5999/bind",
                "127.0.0.1:5999/short",
                "127.0.0.1:5999/csv",
                "a",
            ]
        );
    }

    #[test]
    fn the_escape_directive_changes_the_continuations() {
        let text = format!("# escape=`\nFROM busybox\nRUN echo \\\nFROM {LOCAL}\n");
        assert_eq!(pulled(&text), ["busybox", LOCAL], "\\ continues nothing");
        let text = format!("# Escape = `\nFROM busybox\nRUN echo `\n  `\nFROM {LOCAL}\n");
        assert_eq!(pulled(&text), ["busybox"], "` continues the RUN");
        let text = format!("# escape=`\nFROM busybox AS a \\\nFROM {LOCAL}\n");
        let reason = refused(&text);
        assert!(
            reason.contains("FROM busybox AS a \\ (line 2)")
                && reason.contains("FROM takes an image"),
            "{reason}"
        );
    }

    #[test]
    fn a_directive_counts_only_at_the_very_top() {
        for text in [
            format!("\n# escape=`\nFROM busybox\nRUN echo `\nFROM {LOCAL}\n"),
            format!("# a comment\n# escape=`\nFROM busybox\nRUN echo `\nFROM {LOCAL}\n"),
            format!("FROM busybox\n# escape=`\nRUN echo `\nFROM {LOCAL}\n"),
        ] {
            assert_eq!(pulled(&text), ["busybox", LOCAL], "{text}");
        }
        assert_eq!(
            pulled("\n# syntax=127.0.0.1:5999/frontend\nFROM busybox\n"),
            ["busybox"],
            "a comment, read by no one"
        );
    }

    #[test]
    fn continuations_skip_comments_and_blank_lines_and_take_crlf() {
        let text =
            format!("FROM busybox\nRUN echo \\\n# FROM {LOCAL}\n\n   \n  done\nFROM alpine\n");
        assert_eq!(pulled(&text), ["busybox", "alpine"]);
        assert_eq!(
            pulled("FROM busybox \\\r\n  AS a\r\nFROM a\r\n"),
            ["busybox"]
        );
        assert_eq!(
            pulled("\u{feff}# escape=`\nFROM a `\n AS b\nFROM b\n"),
            ["a"]
        );
    }

    #[test]
    fn a_syntax_directive_names_its_frontend_for_the_policy() {
        for text in [
            "# syntax=docker/dockerfile:1\nFROM busybox\n",
            "# escape=`\n#   SYNTAX = docker/dockerfile:1\nFROM busybox\n",
        ] {
            assert_eq!(pulled(text), ["busybox"], "{text}");
            assert_eq!(
                frontend_image(text).as_deref(),
                Some("docker/dockerfile:1"),
                "{text}"
            );
        }
        assert_eq!(frontend_image("FROM busybox\n"), None);
        assert!(refused("# syntax=${FRONT}\nFROM busybox\n").contains("# syntax"));
    }

    #[test]
    fn directives_docker_versions_read_differently_are_refused() {
        for (text, says) in [
            (
                "# check=skip=all\n# escape=`\nFROM busybox\n",
                "follows a # check",
            ),
            ("# escape=|\nFROM busybox\n", "neither"),
            (
                "# escape=`\n# escape=\\\nFROM busybox\n",
                "more than one # escape",
            ),
        ] {
            let reason = refused(text);
            assert!(reason.contains(says), "{text}: {reason}");
        }
        assert_eq!(
            pulled("# escape=`\n# check=skip=all\nFROM a `\n AS b\n"),
            ["a"]
        );
    }

    #[test]
    fn what_cannot_be_resolved_is_refused_naming_the_instruction() {
        for (text, says) in [
            ("ARG BASE\nFROM ${BASE}\n", "names no image"),
            ("FROM ${BASE?missing}\n", "form of substitution"),
            ("FROM busybox:${1}\n", "form of substitution"),
            ("FROM busybox$1\n", "form of substitution"),
            ("FROM busybox:${TAG\n", "not closed"),
            ("FROM busybox:1$\n", "holds a $"),
            ("FROM \\$HOME\n", "escape character"),
            ("FROM ${HTTP_PROXY}\n", "HTTP_PROXY"),
            ("FROM busybox AS a b\n", "FROM takes an image"),
            ("FROM busybox\nCOPY --from=$X /a /b\n", "with a $"),
            ("FROM busybox\nRUN --mount=from=${X} true\n", "with a $"),
            (
                "FROM busybox\nRUN --mount='type=bind,fr\"om=x' true\n",
                "cannot be read",
            ),
            (
                "FROM busybox\nONBUILD COPY --from=127.0.0.1:5999/x /a /b\n",
                "later build",
            ),
            (
                "FROM busybox\nONBUILD RUN --mount=from=x true\n",
                "later build",
            ),
        ] {
            let reason = refused(text);
            assert!(reason.contains(says), "{text}: {reason}");
            let line = text.lines().last().unwrap();
            assert!(
                reason.contains(line),
                "{text}: names the instruction: {reason}"
            );
        }
    }

    #[test]
    fn an_unresolvable_default_is_refused_only_where_used() {
        let text = "ARG BASE=a\\b\nFROM ${BASE}\n";
        let reason = refused(text);
        assert!(
            reason.contains("build argument BASE") && reason.contains("ARG BASE=a\\b (line 1)"),
            "{reason}"
        );
        assert_eq!(pulled("ARG UNUSED=a\\b\nFROM busybox\n"), ["busybox"]);
    }

    #[test]
    fn a_refusal_never_quotes_a_build_argument() {
        for value in ["s3cret$value", "s3cret value", "s3cret\"value", ""] {
            let reason =
                pulled_images("ARG BASE\nFROM ${BASE}\n", &passing("BASE", value)).unwrap_err();
            assert!(reason.contains("FROM ${BASE} (line 2)"), "{reason}");
            assert!(!reason.contains("s3cret"), "{reason}");
        }
    }

    #[test]
    fn only_the_onbuilds_that_take_files_are_refused() {
        assert_eq!(
            pulled("FROM busybox\nONBUILD RUN echo hi\nONBUILD COPY . /app\n"),
            ["busybox"]
        );
    }
}
