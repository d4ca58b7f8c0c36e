//! TLS material the tests make with openssl: a test authority, server and client
//! certificates.

use super::*;

/// Runs a tool the tests need, which must succeed (else its error output is the failure).
pub fn ran(command: &mut Command) {
    let made = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?} runs: {e}"));
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

pub fn openssl(args: &[&str]) {
    ran(Command::new("openssl").args(args));
}

/// Makes in `dir` a test authority (`ca.pem`, which clients trust) and a certificate it signs
/// for `name`, as the router reads it: `<name>.crt` and `<name>.key`.
pub fn test_certificate(dir: &std::path::Path, name: &str) {
    let at = |file: &str| dir.join(file).to_str().unwrap().to_string();
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=capstan test authority",
        "-keyout",
        &at("ca-key.pem"),
        "-out",
        &at("ca.pem"),
    ]);
    // The address too: a server the tests reach at https://127.0.0.1 (pebble) is trusted.
    signed_by_test_authority(
        dir,
        name,
        &format!("subjectAltName=DNS:{name},IP:127.0.0.1"),
    );
}

/// Makes in `dir` `<name>.crt` and `<name>.key`, a certificate for `name` with `extensions`
/// (an openssl extensions line), signed by the authority `test_certificate` made there.
pub fn signed_by_test_authority(dir: &std::path::Path, name: &str, extensions: &str) {
    let at = |file: &str| dir.join(file).to_str().unwrap().to_string();
    let (ext, csr) = (at(&format!("{name}.ext")), at(&format!("{name}.csr")));
    std::fs::write(&ext, format!("{extensions}\n")).unwrap();
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        &format!("/CN={name}"),
        "-keyout",
        &at(&format!("{name}.key")),
        "-out",
        &csr,
    ]);
    openssl(&[
        "x509",
        "-req",
        "-in",
        &csr,
        "-days",
        "2",
        "-extfile",
        &ext,
        "-CA",
        &at("ca.pem"),
        "-CAkey",
        &at("ca-key.pem"),
        "-CAcreateserial",
        "-out",
        &at(&format!("{name}.crt")),
    ]);
}

/// Makes in `dir` a client certificate `<name>.crt` and `<name>.key`, signed by the authority
/// `test_certificate` made there.
pub fn test_client_certificate(dir: &std::path::Path, name: &str) {
    signed_by_test_authority(dir, name, "extendedKeyUsage=clientAuth");
}
