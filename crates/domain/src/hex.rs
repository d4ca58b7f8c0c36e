//! Lower-case hexadecimal, as digests are stored and shown.

/// `bytes` in lower-case hexadecimal. Written out rather than `format!("{b:02x}")` per byte:
/// every authenticated request hashes its token, and a formatted string per byte was a visible
/// share of a cheap read's time.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_as_formatting_each_byte_does() {
        let bytes: Vec<u8> = (0..=255).collect();
        let formatted: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::encode(&bytes), formatted);
        assert_eq!(super::encode(&[]), "");
    }
}
