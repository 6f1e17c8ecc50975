//! A release a team deploys with the SAM CLI alone (`make release`, `scripts/release.py`): the
//! packaged template validates with `sam validate --lint`, points at one zip a function, and each
//! zip holds the function's `bootstrap` and the version. The packaging runs in `make test` on the
//! debug binaries; `make release` runs the last test on its arm64 build.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const FUNCTIONS: [&str; 5] = ["pulse-sweep", "tenant-fanout", "queue-worker", "archiver", "control"];

fn version() -> String {
    format!("{}+tzdb.{}", tickwork::release::VERSION, tickwork::release::tzdb())
}

/// The files of a zip and the bytes of `bootstrap` and `VERSION` (Python's zipfile: no zip crate
/// for a test, and python3 is what the Makefile runs anyway).
fn zip_contents(zip: &Path) -> (Vec<String>, Vec<u8>, String) {
    let script = "import sys,zipfile\nz=zipfile.ZipFile(sys.argv[1])\nsys.stdout.write('\\n'.join(i.filename+' '+oct(i.external_attr>>16) for i in z.infolist()))";
    let o = std::process::Command::new("python3").args(["-c", script]).arg(zip).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names = String::from_utf8(o.stdout).unwrap().lines().map(str::to_string).collect();
    let read = |member: &str| {
        let o = std::process::Command::new("python3")
            .args(["-c", "import sys,zipfile\nsys.stdout.buffer.write(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]))"])
            .arg(zip)
            .arg(member)
            .output()
            .unwrap();
        assert!(o.status.success(), "{member} in {}: {}", zip.display(), String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    (names, read("bootstrap"), String::from_utf8(read("VERSION")).unwrap())
}

/// ELF's `e_machine` (offset 18, little-endian): 0xB7 is AArch64, 0x3E x86-64. Pure.
fn elf_machine(bytes: &[u8]) -> Option<u16> {
    (bytes.len() > 20 && &bytes[..4] == b"\x7fELF").then(|| u16::from_le_bytes([bytes[18], bytes[19]]))
}

/// What every release holds, whatever the binaries' architecture (`machine`).
fn check_release(dir: &Path, machine: u16) {
    let v = version();
    let template = std::fs::read_to_string(dir.join("template.yaml")).unwrap();
    assert!(!template.contains("BuildMethod"), "a packaged template asks for no build");
    assert!(!template.contains("CodeUri: crates/"), "every function's code is its zip");
    assert!(template.contains(&format!("Value: \"{v}\"")), "the template reports its release");
    let sam = root().join(".tools/sam/bin/sam");
    assert!(sam.exists(), "{} is missing: `make test` installs it", sam.display());
    let o = std::process::Command::new(&sam)
        .args(["validate", "--lint", "--template"])
        .arg(dir.join("template.yaml"))
        .env("SAM_CLI_TELEMETRY", "0")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "sam validate --lint:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    for f in FUNCTIONS {
        let rel = format!("functions/{f}.zip");
        assert!(template.contains(&format!("CodeUri: {rel}")), "{f}: the template points at {rel}");
        let zip = dir.join(&rel);
        let bytes = std::fs::read(&zip).unwrap();
        use sha2::Digest;
        let digest: String = sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert!(sums.lines().any(|l| l == format!("{digest}  {rel}")), "{rel}: its checksum is in SHA256SUMS");
        let (names, bootstrap, version_file) = zip_contents(&zip);
        assert_eq!(names, ["bootstrap 0o100755", "VERSION 0o100644"], "{f}");
        assert_eq!(elf_machine(&bootstrap), Some(machine), "{f}: bootstrap is an ELF for machine {machine:#x}");
        assert_eq!(version_file.trim(), v, "{f}");
        let has = |s: &str| bootstrap.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(
            has(tickwork::release::tzdb()) && has("tickwork function starting"),
            "{f}: the binary reports its release"
        );
    }
    let samconfig = std::fs::read(dir.join("samconfig.toml")).unwrap();
    assert_eq!(
        samconfig,
        std::fs::read(root().join("samconfig.toml")).unwrap(),
        "the release deploys samconfig's environments"
    );
    use sha2::Digest;
    let digest: String = sha2::Sha256::digest(&samconfig).iter().map(|b| format!("{b:02x}")).collect();
    assert!(
        sums.lines().any(|l| l == format!("{digest}  samconfig.toml")),
        "samconfig.toml's checksum is in SHA256SUMS"
    );
    let notes = std::fs::read_to_string(dir.join("RELEASE_NOTES.md")).unwrap();
    assert!(notes.starts_with(&format!("## {v}")) && notes.contains(tickwork::release::tzdb()), "{notes}");
}

/// The packaging on this build's own binaries (x86-64, debug): the template rewrite, the zips,
/// the checksums and the notes, and `sam validate --lint` of what it wrote.
#[test]
fn the_packaged_template_validates_and_points_at_one_zip_a_function() {
    let tmp = std::env::temp_dir().join(tickwork_tests::unique("release"));
    let bins = tmp.join("bins");
    for (f, exe) in [
        ("pulse-sweep", env!("CARGO_BIN_EXE_lambda-pulse-sweep")),
        ("tenant-fanout", env!("CARGO_BIN_EXE_lambda-tenant-fanout")),
        ("queue-worker", env!("CARGO_BIN_EXE_lambda-queue-worker")),
        ("archiver", env!("CARGO_BIN_EXE_lambda-archiver")),
        ("control", env!("CARGO_BIN_EXE_lambda-control")),
    ] {
        std::fs::create_dir_all(bins.join(f)).unwrap();
        std::fs::copy(exe, bins.join(f).join("bootstrap")).unwrap();
    }
    let out = tmp.join("out");
    let o = std::process::Command::new("python3")
        .arg(root().join("scripts/release.py"))
        .arg(version())
        .args(FUNCTIONS)
        .env("TICKWORK_RELEASE_BINARIES", &bins)
        .env("TICKWORK_RELEASE_OUT", &out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    check_release(&out, 0x3e);
    // A release whose notes are not written is refused, naming the entry.
    let o = std::process::Command::new("python3")
        .arg(root().join("scripts/release.py"))
        .arg("9.9.9+tzdb.2026f")
        .args(FUNCTIONS)
        .env("TICKWORK_RELEASE_BINARIES", &bins)
        .env("TICKWORK_RELEASE_OUT", tmp.join("other"))
        .output()
        .unwrap();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("Version output"), "{o:?}");
}

/// `make release`'s own output (arm64): run by `make release` after it packages.
#[test]
#[ignore = "run by `make release` on its arm64 build (TICKWORK_RELEASE_DIR)"]
fn the_release_deploys_with_the_sam_cli_alone() {
    let dir = std::env::var("TICKWORK_RELEASE_DIR").expect("TICKWORK_RELEASE_DIR: run `make release`");
    check_release(Path::new(&dir), 0xb7);
}

#[test]
fn an_elf_header_names_its_machine() {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[18] = 0xb7;
    assert_eq!(elf_machine(&h), Some(0xb7));
    assert_eq!(elf_machine(b"#!/bin/sh\n"), None);
}
