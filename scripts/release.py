"""Packages a release from the arm64 binaries `cargo lambda build --release --arm64` left in
target/lambda/<function>/bootstrap: one zip a function (its `bootstrap` and a VERSION file), the
template pointing at the zips, the repository's samconfig.toml, SHA256SUMS and the release notes,
in dist/tickwork-<version>/. Called by `make release`; `sam deploy --config-env dev` run in that
directory then uploads the zips and deploys samconfig's environment with the SAM CLI alone (no
Rust, no build).

    python3 scripts/release.py VERSION FUNCTION...
"""
import hashlib, os, re, sys, zipfile

version, functions = sys.argv[1], sys.argv[2:]
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where the binaries are and where the release goes: the Makefile's defaults, or a test's.
binaries = os.environ.get("TICKWORK_RELEASE_BINARIES", os.path.join(root, "target", "lambda"))
out = os.environ.get("TICKWORK_RELEASE_OUT", os.path.join(root, "dist", f"tickwork-{version}"))
os.makedirs(os.path.join(out, "functions"), exist_ok=True)

template = open(os.path.join(root, "template.yaml")).read()
m = re.search(r'^  Version:\n(?:    .*\n)*?    Value: "([^"]+)"', template, re.M)
if not m or m.group(1) != version:
    sys.exit(f"template.yaml's Version output is {m.group(1) if m else 'missing'}, the release is {version}")
changelog = open(os.path.join(root, "CHANGELOG.md")).read()
entry = re.search(rf"^## {re.escape(version)}\b.*?(?=^## |\Z)", changelog, re.M | re.S)
if not entry:
    sys.exit(f"CHANGELOG.md has no `## {version}` entry: write the release notes first")

sums = []
for fn in functions:
    binary = os.path.join(binaries, fn, "bootstrap")
    if not os.path.exists(binary):
        sys.exit(f"{binary} is missing: cargo lambda build --release --arm64 did not build {fn}")
    zpath = os.path.join(out, "functions", f"{fn}.zip")
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        # Fixed dates and modes: the same binaries make the same zips (and checksums).
        info = zipfile.ZipInfo("bootstrap", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o100755 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, open(binary, "rb").read())
        info = zipfile.ZipInfo("VERSION", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o100644 << 16
        z.writestr(info, version + "\n")
    sums.append((hashlib.sha256(open(zpath, "rb").read()).hexdigest(), f"functions/{fn}.zip"))

# The source template with each function's code the zip (no build step): `CodeUri` a local zip,
# which `sam deploy` uploads, and no `BuildMethod`, which would ask for cargo-lambda.
packaged, n = re.subn(r"^(\s+)CodeUri: crates/([a-z-]+)$", r"\1CodeUri: functions/\2.zip", template, flags=re.M)
if n != len(functions):
    sys.exit(f"template.yaml has {n} CodeUri lines for {len(functions)} functions")
packaged = re.sub(r"^\s+BuildMethod: rust-cargolambda\n", "", packaged, flags=re.M)
open(os.path.join(out, "template.yaml"), "w").write(packaged)
sums.append((hashlib.sha256(packaged.encode()).hexdigest(), "template.yaml"))
# The environments `make deploy` uses, so that the release deploys the same stacks (a bare
# `--stack-name` would make a third stack with the template's live defaults).
samconfig = open(os.path.join(root, "samconfig.toml")).read()
open(os.path.join(out, "samconfig.toml"), "w").write(samconfig)
sums.append((hashlib.sha256(samconfig.encode()).hexdigest(), "samconfig.toml"))
open(os.path.join(out, "RELEASE_NOTES.md"), "w").write(entry.group(0))
with open(os.path.join(out, "SHA256SUMS"), "w") as f:
    for h, p in sums:
        f.write(f"{h}  {p}\n")
print(f"release {version} in {os.path.relpath(out, root)}: {len(functions)} functions, template, samconfig.toml, SHA256SUMS, RELEASE_NOTES.md")
