//! A fixture's text: JSON, or YAML (which test suites often keep their fixtures in).

use crate::error::ApiError;
use domain::model::{from_json, Fixture};

/// Reads a fixture; JSON when it starts with `{`, YAML otherwise. Errors name the member at
/// fault.
pub fn parse(text: &[u8]) -> Result<Fixture, ApiError> {
    let json = text
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    let value: serde_json::Value = if json {
        serde_json::from_slice(text)
            .map_err(|e| ApiError::bad_request(format!("body: malformed JSON: {e}")))?
    } else {
        serde_yaml_ng::from_slice(text)
            .map_err(|e| ApiError::bad_request(format!("body: malformed YAML: {e}")))?
    };
    if value.is_null() {
        return Ok(Fixture::default());
    }
    Ok(from_json(&value)?)
}

/// A fixture as YAML.
pub fn yaml(fixture: &Fixture) -> Result<String, ApiError> {
    serde_yaml_ng::to_string(fixture).map_err(|e| {
        ApiError::new(
            actix_web::http::StatusCode::INTERNAL_SERVER_ERROR,
            format!("the export could not be written as YAML: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_yaml_read_the_same_and_errors_name_the_member() {
        let written = "organizations:\n  - name: Acme\n    tokens:\n      - name: ci\n        value: cap_fixed_value\n    projects:\n      - name: shop\n";
        let json = r#"{"organizations": [{"name": "Acme", "tokens": [{"name": "ci", "value": "cap_fixed_value"}], "projects": [{"name": "shop"}]}]}"#;
        let a = parse(written.as_bytes()).unwrap();
        assert_eq!(a, parse(json.as_bytes()).unwrap());
        assert_eq!(a.organizations[0].tokens[0].role, "ADMIN");
        let bad = parse(b"organizations:\n  - name: Acme\n    projcts: []\n").unwrap_err();
        assert!(
            bad.message.starts_with("organizations[0].projcts:"),
            "{}",
            bad.message
        );
        assert!(parse(b"{nope")
            .unwrap_err()
            .message
            .starts_with("body: malformed JSON"));
        assert_eq!(parse(b"").unwrap(), Fixture::default());
        let mut unvalued = a.clone();
        unvalued.organizations[0].tokens[0].value = None;
        assert_eq!(
            parse(yaml(&a).unwrap().as_bytes()).unwrap(),
            unvalued,
            "values are not written"
        );
    }
}
