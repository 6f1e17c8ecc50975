//! `--stack NAME` and `--env-file PATH`: the settings of a deployed stack, applied before anything
//! reads the environment, with the shell's own endpoints and tickwork settings dropped.

use anyhow::{Context, Result};

use crate::cli::Cli;

/// The variable that moves the stack files, read by `scripts/stack-env.sh` too.
const STACKS_DIR: &str = "TICKWORK_STACKS_DIR";

/// Where `--stack NAME` looks: the file `make stack-env STACK=NAME` writes, in `dir` (default
/// `.local/stacks`). A name that is not a stack name is refused: CloudFormation's rule, which also
/// keeps the path inside the directory. Pure.
fn stack_file(dir: Option<&str>, name: &str) -> Result<std::path::PathBuf> {
    anyhow::ensure!(
        name.starts_with(|c: char| c.is_ascii_alphabetic())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
        "`{name}` is not a stack name (a letter, then letters, digits and hyphens)"
    );
    Ok(std::path::Path::new(dir.unwrap_or(".local/stacks")).join(format!("{name}.env")))
}

/// Applies the file `--env-file` or `--stack` names, if any; the file wins over the shell.
pub fn load_env_file(cli: &Cli) -> Result<()> {
    let path = match (&cli.env_file, &cli.stack) {
        (Some(p), _) => p.clone(),
        (None, Some(name)) => {
            let p = stack_file(std::env::var(STACKS_DIR).ok().as_deref(), name)?;
            anyhow::ensure!(
                p.exists(),
                "no environment for stack `{name}` at {}: run `make stack-env STACK={name}` (it reads the stack's outputs)",
                p.display()
            );
            p
        }
        (None, None) => return Ok(()),
    };
    if cli.stack.is_some() {
        // A deployed stack is reached with the file's settings alone: an endpoint or a tickwork
        // setting left in the shell from a local session would otherwise send `--stack prod`'s
        // writes to the local server, or to another table, and report success.
        let file: Vec<String> = dotenvy::from_path_iter(&path)
            .with_context(|| format!("reading {}", path.display()))?
            .filter_map(|kv| kv.ok().map(|(k, _)| k))
            .collect();
        for k in shell_settings_to_drop(std::env::vars().map(|(k, _)| k), &file) {
            // Before the runtime starts: no other thread reads the environment yet.
            std::env::remove_var(&k);
        }
    }
    // The file wins over the shell: naming a file or a stack is the more explicit choice.
    dotenvy::from_path_override(&path).with_context(|| format!("reading {}", path.display()))
}

/// The shell's variables a stack's file does not set and that would point `tickctl` elsewhere:
/// endpoints (`AWS_ENDPOINT_URL*`) and tickwork settings. Pure.
fn shell_settings_to_drop(shell: impl Iterator<Item = String>, file: &[String]) -> Vec<String> {
    shell.filter(|k| (k.starts_with("AWS_ENDPOINT_URL") || k.starts_with("TICKWORK_")) && !file.contains(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_file_is_found_by_a_stack_name_only() {
        assert_eq!(stack_file(None, "prod").unwrap(), std::path::Path::new(".local/stacks/prod.env"));
        assert_eq!(stack_file(Some("/tmp/s"), "dev-2").unwrap(), std::path::Path::new("/tmp/s/dev-2.env"));
        for bad in ["../etc/passwd", "prod/x", "2prod", "", "prod.env"] {
            assert!(stack_file(None, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_stack_file_keeps_only_its_own_endpoints_and_settings() {
        let shell = ["AWS_ENDPOINT_URL_DYNAMODB", "TICKWORK_TABLE_PREFIX", "TICKWORK_PULSE_JOB", "AWS_PROFILE", "HOME"]
            .map(String::from);
        let file = ["TICKWORK_TABLE_PREFIX".to_string()];
        assert_eq!(
            shell_settings_to_drop(shell.into_iter(), &file),
            ["AWS_ENDPOINT_URL_DYNAMODB", "TICKWORK_PULSE_JOB"],
            "credentials and the rest of the shell stay"
        );
    }
}
