//! Which optional parts a stack deploys (the template's `Fanout` and `Archiver` parameters, its
//! `Parts` output, `TICKWORK_STACK_PARTS` here), so that `tickctl` reports on and acts on only
//! what is there: a stack without the fan-out has no fan-out lease or state, and a `status` that
//! listed one would show a job "never run" that is not meant to run.

use tickwork::config::{ConfigError, Env};

use crate::function::Function;

/// The optional parts deployed; the sweep, worker and control function are always there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Parts {
    /// The tenant fan-out.
    pub fanout: bool,
    /// The archiver, its change table and bucket.
    pub archiver: bool,
}

impl Parts {
    /// Every part, as the template's defaults deploy.
    pub const ALL: Parts = Parts { fanout: true, archiver: true };

    /// Parses the `Parts` output: `none`, or a comma-separated list of `fanout` and `archiver`.
    /// Anything else is refused, naming it (a typo would otherwise hide a part). Pure.
    pub fn parse(text: &str) -> Result<Parts, ConfigError> {
        let var = tickwork::env::STACK_PARTS;
        let mut parts = Parts { fanout: false, archiver: false };
        if text.trim() == "none" {
            return Ok(parts);
        }
        for p in text.split(',').map(str::trim) {
            match p {
                "fanout" => parts.fanout = true,
                "archiver" => parts.archiver = true,
                other => {
                    return Err(ConfigError::invalid(
                        var,
                        format!("`{other}` is not a part (`none`, or a comma-separated list of fanout, archiver)"),
                    ))
                }
            }
        }
        Ok(parts)
    }

    /// The stack's parts from the environment; every part when unset (the template's defaults).
    pub fn from_env(env: &Env) -> Result<Parts, ConfigError> {
        env.get(tickwork::env::STACK_PARTS).map_or(Ok(Parts::ALL), |t| Parts::parse(&t))
    }

    /// Whether `f` is deployed. Pure.
    pub fn has(self, f: Function) -> bool {
        match f {
            Function::TenantFanout => self.fanout,
            Function::Archiver => self.archiver,
            Function::PulseSweep | Function::QueueWorker => true,
        }
    }

    /// `f` is deployed, or a refusal naming the parameter that leaves it out.
    pub fn require(self, f: Function, command: &str) -> anyhow::Result<()> {
        let parameter = match f {
            Function::TenantFanout => "Fanout",
            _ => "Archiver",
        };
        anyhow::ensure!(
            self.has(f),
            "`tickctl {command}`: the stack deploys no {} ({parameter}=false; {} is `{}`)",
            f.name(),
            tickwork::env::STACK_PARTS,
            self.text()
        );
        Ok(())
    }

    /// As the `Parts` output writes it. Pure.
    pub fn text(self) -> &'static str {
        match (self.fanout, self.archiver) {
            (true, true) => "fanout,archiver",
            (true, false) => "fanout",
            (false, true) => "archiver",
            (false, false) => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outputs_text_round_trips_and_a_typo_is_refused() {
        for p in [Parts::ALL, Parts { fanout: false, archiver: true }, Parts { fanout: true, archiver: false }] {
            assert_eq!(Parts::parse(p.text()).unwrap(), p);
        }
        assert_eq!(Parts::parse("none").unwrap(), Parts { fanout: false, archiver: false });
        let e = Parts::parse("fanout,archive").unwrap_err();
        assert!(e.to_string().contains("`archive` is not a part"), "{e}");
        assert!(Parts::parse("").is_err(), "an empty output is not `none`");
    }

    #[test]
    fn a_part_not_deployed_is_refused_by_its_parameter() {
        let p = Parts::parse("archiver").unwrap();
        assert!(p.has(Function::PulseSweep) && p.has(Function::QueueWorker) && p.has(Function::Archiver));
        let e = p.require(Function::TenantFanout, "pause tenant-fanout").unwrap_err().to_string();
        assert!(e.contains("Fanout=false") && e.contains("tenant-fanout"), "{e}");
        assert!(p.require(Function::Archiver, "pause archiver").is_ok());
    }
}
