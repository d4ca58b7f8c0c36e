//! Bearer JWTs: verified with an HS256 shared secret or an RS256/ES256 public key; `exp` is
//! required, `nbf` honoured, `iss` and `aud` checked when configured. The subject (`sub`) is the
//! user; its roles come from the organizations' members.

use jsonwebtoken::{decode, Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::fmt;

/// How Bearer tokens are verified.
#[derive(Clone)]
pub struct JwtVerifier {
    key: DecodingKey,
    validation: Validation,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("algorithms", &self.validation.algorithms)
            .finish()
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
}

/// A clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 30;

impl JwtVerifier {
    pub fn hs256(secret: &[u8]) -> Self {
        Self::new(DecodingKey::from_secret(secret), Algorithm::HS256)
    }

    /// From a PEM public key: RSA keys verify RS256, EC (P-256) keys ES256.
    pub fn from_public_key_pem(pem: &[u8]) -> Result<Self, String> {
        if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
            return Ok(Self::new(key, Algorithm::RS256));
        }
        if let Ok(key) = DecodingKey::from_ec_pem(pem) {
            return Ok(Self::new(key, Algorithm::ES256));
        }
        Err("not an RSA or EC public key in PEM".into())
    }

    fn new(key: DecodingKey, algorithm: Algorithm) -> Self {
        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "sub"]);
        Self { key, validation }
    }

    pub fn with_issuer(mut self, issuer: Option<&str>) -> Self {
        if let Some(iss) = issuer {
            self.validation.set_issuer(&[iss]);
            self.validation.required_spec_claims.insert("iss".into());
        }
        self
    }

    pub fn with_audience(mut self, audience: Option<&str>) -> Self {
        if let Some(aud) = audience {
            self.validation.set_audience(&[aud]);
            self.validation.validate_aud = true;
            self.validation.required_spec_claims.insert("aud".into());
        }
        self
    }

    /// The token's subject, or why it is refused (without echoing the token).
    pub fn subject(&self, token: &str) -> Result<String, String> {
        use jsonwebtoken::errors::ErrorKind;
        decode::<Claims>(token, &self.key, &self.validation)
            .map(|data| data.claims.sub)
            .map_err(|e| {
                match e.kind() {
                    ErrorKind::ExpiredSignature => "the JWT has expired",
                    ErrorKind::ImmatureSignature => "the JWT is not valid yet (nbf)",
                    ErrorKind::InvalidIssuer => "the JWT's issuer is not accepted",
                    ErrorKind::InvalidAudience => "the JWT's audience is not accepted",
                    ErrorKind::MissingRequiredClaim(_) => {
                        "the JWT lacks a required claim (exp, sub)"
                    }
                    ErrorKind::InvalidSignature => "the JWT's signature does not verify",
                    ErrorKind::InvalidAlgorithm => "the JWT is signed with another algorithm",
                    _ => "the JWT is malformed",
                }
                .to_string()
            })
    }
}
