//! The scripts that pass a separate verifier's artifacts from the agent's
//! container to the verifier's, as Harbor transfers them: each path packed
//! in the agent's container with tar (a folder without what its `exclude`
//! patterns match, tar's `--exclude`), copied out through the host by the
//! engine, and unpacked at the same path in the verifier's container,
//! where nothing else of the agent's container goes. A missing path, or
//! one that cannot be packed, is skipped (Harbor's transfer is
//! best-effort). container.rs runs them; this file only writes them.

use super::image_repo::quote;
use crate::task::Artifact;

/// Where the archives wait, in both containers (and the folder the host
/// copy of them is named after).
pub(super) const STAGING: &str = "/tmp/onebash-artifacts";

/// Packs each artifact to `STAGING/N.dir.tar` (a folder's contents) or
/// `STAGING/N.file.tar` (a file, by its name), in the agent's container.
pub(super) fn pack(artifacts: &[Artifact]) -> String {
    let mut script = format!("rm -rf {STAGING} && mkdir -p {STAGING} || exit 1\n");
    for (n, artifact) in artifacts.iter().enumerate() {
        let source = quote(artifact.source.trim_end_matches('/'));
        let excludes: String = artifact
            .exclude
            .iter()
            .map(|pattern| format!(" --exclude={}", quote(pattern)))
            .collect();
        script.push_str(&format!(
            "if [ -d {source} ]; then tar cf {STAGING}/{n}.dir.tar{excludes} -C {source} . ; \
             elif [ -e {source} ]; then tar cf {STAGING}/{n}.file.tar -C \"$(dirname {source})\" \"$(basename {source})\" ; \
             fi || rm -f {STAGING}/{n}.dir.tar {STAGING}/{n}.file.tar\n"
        ));
    }
    script.push_str("true\n");
    script
}

/// Unpacks what [`pack`] made at the same paths in the verifier's
/// container, then removes the archives. The archives hold what the agent
/// made: GNU tar strips leading `/`, skips `..` members and defers links
/// that point out of the target, and the tests are copied in afterwards,
/// over whatever an archive put at their place.
pub(super) fn unpack(artifacts: &[Artifact]) -> String {
    let mut script = String::new();
    for (n, artifact) in artifacts.iter().enumerate() {
        let source = quote(artifact.source.trim_end_matches('/'));
        script.push_str(&format!(
            "if [ -f {STAGING}/{n}.dir.tar ]; then mkdir -p {source} && tar xf {STAGING}/{n}.dir.tar --no-same-owner -C {source} ; \
             elif [ -f {STAGING}/{n}.file.tar ]; then mkdir -p \"$(dirname {source})\" && tar xf {STAGING}/{n}.file.tar --no-same-owner -C \"$(dirname {source})\" ; \
             fi || exit 1\n"
        ));
    }
    script.push_str(&format!("rm -rf {STAGING}\n"));
    script
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact(source: &str, exclude: &[&str]) -> Artifact {
        Artifact {
            source: source.to_owned(),
            exclude: exclude.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// The scripts run for real on the host, from one folder standing for
    /// the agent's container to another standing for the verifier's.
    #[test]
    fn a_folder_passes_without_its_excluded_files_and_a_file_by_its_path() {
        let root = tempfile::tempdir().expect("tempdir");
        let out = root.path().join("agent/out");
        std::fs::create_dir_all(out.join("cache")).expect("mkdir");
        std::fs::write(out.join("keep.txt"), "kept").expect("write");
        std::fs::write(out.join("drop.tmp"), "dropped").expect("write");
        std::fs::write(out.join("cache/x"), "dropped").expect("write");
        std::fs::write(root.path().join("agent/note"), "note").expect("write");
        let artifacts = [
            artifact(&format!("{}/", out.display()), &["*.tmp", "cache"]),
            artifact(&root.path().join("agent/note").display().to_string(), &[]),
            artifact("/nonexistent/onebash", &[]),
        ];
        let run = |script: &str| {
            let status = std::process::Command::new("bash")
                .arg("-c")
                .arg(script.replace(STAGING, &root.path().join("staging").display().to_string()))
                .status()
                .expect("bash");
            assert!(status.success(), "{script}");
        };
        run(&pack(&artifacts));
        // The verifier's side: the agent's files gone, only the archives.
        let agent = root.path().join("agent");
        std::fs::rename(&agent, root.path().join("gone")).expect("rename");
        run(&unpack(&artifacts));
        assert_eq!(
            std::fs::read_to_string(out.join("keep.txt")).expect("kept"),
            "kept"
        );
        assert!(!out.join("drop.tmp").exists() && !out.join("cache").exists());
        assert_eq!(
            std::fs::read_to_string(agent.join("note")).expect("note"),
            "note"
        );
        assert!(!root.path().join("staging").exists());
    }
}
