//! File variables as the tar archive Docker copies into a container before it starts: each file
//! read-only (0444) at its mount path, its directories made as needed.

use crate::plan::PlannedFile;
use domain::engine::EngineError;

pub fn archive(files: &[PlannedFile]) -> Result<Vec<u8>, EngineError> {
    let mut builder = tar::Builder::new(Vec::new());
    for f in files {
        let path = f.path.trim_start_matches('/');
        if path.is_empty() || path.split('/').any(|part| part == "..") {
            return Err(format!("a file variable's mount path is not a file: {}", f.path).into());
        }
        let mut header = tar::Header::new_gnu();
        header.set_size(f.content.len() as u64);
        header.set_mode(0o444);
        header.set_cksum();
        builder
            .append_data(&mut header, path, f.content.as_slice())
            .map_err(|e| format!("could not write file variable {}: {e}", f.path))?;
    }
    builder
        .into_inner()
        .map_err(|e| format!("could not write the file variables: {e}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_read_only_at_their_paths_and_no_path_climbs_out() {
        let bytes = archive(&[PlannedFile {
            path: "/etc/app/config.toml".into(),
            content: b"a = 1".to_vec(),
        }])
        .unwrap();
        let mut read = tar::Archive::new(bytes.as_slice());
        let entry = read.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("etc/app/config.toml"));
        assert_eq!(entry.header().mode().unwrap(), 0o444);
        assert!(archive(&[PlannedFile {
            path: "/etc/../../x".into(),
            content: Vec::new(),
        }])
        .is_err());
    }
}
