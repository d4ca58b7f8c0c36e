//! What a build needs to know of a Dockerfile before Docker reads it: the build arguments it
//! declares (only those of the service's variables are passed) and the images its stages start
//! from (pulled first, through the outbound policy).

use std::collections::BTreeSet;

/// The instructions, each on one line: continuations joined, comments and blank lines gone.
fn instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// The instruction's keyword (upper case) and the rest.
fn split(instruction: &str) -> (String, &str) {
    let mut parts = instruction.splitn(2, char::is_whitespace);
    let keyword = parts.next().unwrap_or_default().to_ascii_uppercase();
    (keyword, parts.next().unwrap_or_default().trim())
}

/// The names every `ARG` declares.
pub fn declared_args(text: &str) -> BTreeSet<String> {
    instructions(text)
        .iter()
        .map(|i| split(i))
        .filter(|(keyword, _)| keyword == "ARG")
        .flat_map(|(_, rest)| {
            rest.split_whitespace()
                .filter_map(|word| word.split('=').next())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// The images the stages start from: neither an earlier stage, nor `scratch`, nor a name
/// made of build arguments (Docker resolves those itself).
pub fn base_images(text: &str) -> Vec<String> {
    let mut stages: BTreeSet<String> = BTreeSet::new();
    let mut images = Vec::new();
    for instruction in instructions(text) {
        let (keyword, rest) = split(&instruction);
        if keyword != "FROM" {
            continue;
        }
        let words: Vec<&str> = rest
            .split_whitespace()
            .filter(|w| !w.starts_with("--"))
            .collect();
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

    #[test]
    fn every_declared_argument_is_found() {
        let args: Vec<String> = declared_args(MULTI).into_iter().collect();
        assert_eq!(args, ["BASE", "COMMIT", "VERSION", "lower"]);
    }

    #[test]
    fn base_images_leave_out_stages_scratch_and_arguments() {
        assert_eq!(
            base_images(MULTI),
            ["golang:1.22", "registry.local:5000/team/base:1"]
        );
        assert_eq!(base_images("FROM busybox\nFROM busybox\n"), ["busybox"]);
    }
}
