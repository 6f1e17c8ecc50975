//! Which kinds go to which target: `TICKWORK_TARGETS`, read once at start-up. Pure.
//!
//! Why a list of `kinds=ARN` entries: the ARN alone says what the target is (a Lambda function, an
//! SQS queue — FIFO when its name ends `.fifo`, as SQS requires of FIFO queue names — or an
//! EventBridge bus), and it is what the template's IAM statement names, so the setting and the
//! grant are the same string. Entries are separated by `;` or whitespace; an empty entry is
//! ignored (the template joins its optional slots, empty when unset). A setting that cannot be
//! right — a kind routed twice, an ARN of another service or resource type, no kinds — is refused
//! at start-up, naming the entry: the worker never guesses where work goes.

use std::collections::BTreeSet;

/// A target, from its ARN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Lambda function in any runtime, invoked with a batch in the SQS event's shape.
    Function {
        /// The function's ARN (the `FunctionName` an Invoke takes, and what IAM names).
        arn: String,
        /// Its region.
        region: String,
    },
    /// An SQS queue.
    Queue {
        /// The queue's ARN.
        arn: String,
        /// Its region.
        region: String,
        /// The queue's URL, from its ARN: `https://sqs.<region>.<domain>/<account>/<name>`
        /// (SQS Developer Guide, "Amazon SQS queue and message identifiers").
        url: String,
        /// A FIFO queue (its name ends `.fifo`).
        fifo: bool,
    },
    /// An EventBridge event bus.
    Bus {
        /// The bus's ARN (PutEvents takes it as `EventBusName`).
        arn: String,
        /// Its region.
        region: String,
    },
}

impl Target {
    /// The ARN.
    pub fn arn(&self) -> &str {
        match self {
            Target::Function { arn, .. } | Target::Queue { arn, .. } | Target::Bus { arn, .. } => arn,
        }
    }

    /// The region its calls go to.
    pub fn region(&self) -> &str {
        match self {
            Target::Function { region, .. } | Target::Queue { region, .. } | Target::Bus { region, .. } => region,
        }
    }
}

/// Kinds and where they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The kinds (non-empty, each routed once).
    pub kinds: Vec<String>,
    /// Where.
    pub target: Target,
}

/// Why `TICKWORK_TARGETS` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("target entry `{entry}`: {why}")]
pub struct RouteError {
    /// The entry.
    pub entry: String,
    /// What is wrong with it.
    pub why: String,
}

/// Parses `kinds=ARN` entries. Pure.
pub fn parse_routes(s: &str) -> Result<Vec<Route>, RouteError> {
    let mut routes = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in s.split([';', ' ', '\n', '\t']).map(str::trim).filter(|e| !e.is_empty()) {
        let err = |why: String| RouteError { entry: entry.to_string(), why };
        let (kinds, arn) = entry.split_once('=').ok_or_else(|| err("expected `kind[,kind…]=ARN`".into()))?;
        let kinds: Vec<String> = kinds.split(',').map(str::trim).filter(|k| !k.is_empty()).map(String::from).collect();
        if kinds.is_empty() {
            return Err(err("names no kind".into()));
        }
        for k in &kinds {
            if k.len() > 64 || !k.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
                return Err(err(format!("kind `{k}`: 1 to 64 of A-Z a-z 0-9 - _ .")));
            }
            if !seen.insert(k.clone()) {
                return Err(err(format!("kind `{k}` is routed twice")));
            }
        }
        routes.push(Route { kinds, target: parse_arn(arn.trim()).map_err(err)? });
    }
    Ok(routes)
}

/// A target from its ARN (`arn:partition:service:region:account:resource`, IAM User Guide, "IAM
/// identifiers"). Pure.
pub fn parse_arn(arn: &str) -> Result<Target, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let [scheme, partition, service, region, account, resource] = parts[..] else {
        return Err(format!("`{arn}` is not an ARN (arn:partition:service:region:account:resource)"));
    };
    if scheme != "arn" || partition.is_empty() || region.is_empty() || account.is_empty() || resource.is_empty() {
        return Err(format!("`{arn}` is not an ARN with a region and an account"));
    }
    // Names of functions and queues: letters, digits, `-` and `_` (Lambda API reference,
    // "CreateFunction": FunctionName; SQS API reference, "CreateQueue": QueueName); bus names
    // may also hold `.` (EventBridge API reference, "CreateEventBus": Name).
    let name_ok = |n: &str, max: usize, dots: bool| {
        !n.is_empty()
            && n.len() <= max
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || (dots && c == '.'))
    };
    // `us-east-1`, `eu-central-2`, `us-gov-west-1`, `cn-north-1`.
    let region_ok = {
        let parts: Vec<&str> = region.split('-').collect();
        parts.len() >= 3
            && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
            && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
    };
    if !region_ok {
        return Err(format!("`{region}` is not a region (such as us-east-1)"));
    }
    if account.len() != 12 || !account.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("`{account}` is not an account id (12 digits)"));
    }
    let region = region.to_string();
    match service {
        "lambda" => {
            let name =
                resource.strip_prefix("function:").ok_or("a Lambda ARN must name a function (…:function:NAME)")?;
            // An optional version or alias after the name (Lambda API reference, "Invoke": FunctionName).
            let (bare, qualifier) = match name.split_once(':') {
                Some((n, q)) => (n, Some(q)),
                None => (name, None),
            };
            if !name_ok(bare, 64, false) {
                return Err(format!("function name `{bare}`: 1 to 64 of A-Z a-z 0-9 - _"));
            }
            // A version (digits) or an alias: 1 to 128 of A-Z a-z 0-9 - _, or `$LATEST`.
            if let Some(q) = qualifier {
                if q != "$LATEST" && !name_ok(q, 128, false) {
                    return Err(format!(
                        "function qualifier `{q}`: a version or an alias (1 to 128 of A-Z a-z 0-9 - _)"
                    ));
                }
            }
            Ok(Target::Function { arn: arn.to_string(), region })
        }
        "sqs" => {
            // Queue names: up to 80 alphanumerics, hyphens, underscores, with `.fifo` for FIFO
            // (SQS Developer Guide, "Amazon SQS quotas": queue name).
            let fifo = resource.ends_with(".fifo");
            let base = resource.strip_suffix(".fifo").unwrap_or(resource);
            if !name_ok(base, if fifo { 75 } else { 80 }, false) {
                return Err(format!(
                    "queue name `{resource}`: up to 80 of A-Z a-z 0-9 - _, `.fifo` at the end for FIFO"
                ));
            }
            let url = format!("https://sqs.{region}.{}/{account}/{resource}", domain(partition));
            Ok(Target::Queue { arn: arn.to_string(), region, url, fifo })
        }
        "events" => {
            let name =
                resource.strip_prefix("event-bus/").ok_or("an EventBridge ARN must name a bus (…:event-bus/NAME)")?;
            // Partner buses are named `aws.partner/…`.
            if !name_ok(&name.replace('/', ""), 256, true) || name.starts_with('/') {
                return Err(format!("bus name `{name}`: 1 to 256 of A-Z a-z 0-9 - _ . /"));
            }
            Ok(Target::Bus { arn: arn.to_string(), region })
        }
        other => Err(format!("service `{other}` is not a target (lambda, sqs or events)")),
    }
}

/// A partition's domain (AWS General Reference, "AWS service endpoints"; the isolated
/// partitions' as the SDKs' endpoint rules name them).
pub fn domain(partition: &str) -> &'static str {
    match partition {
        "aws-cn" => "amazonaws.com.cn",
        "aws-iso" => "c2s.ic.gov",
        "aws-iso-b" => "sc2s.sgov.gov",
        "aws-iso-e" => "cloud.adc-e.uk",
        "aws-iso-f" => "csp.hci.ic.gov",
        _ => "amazonaws.com",
    }
}

/// A region's partition, from its name.
pub fn partition_of(region: &str) -> &'static str {
    match region {
        r if r.starts_with("cn-") => "aws-cn",
        r if r.starts_with("us-gov-") => "aws-us-gov",
        r if r.starts_with("us-isob-") => "aws-iso-b",
        r if r.starts_with("us-isof-") => "aws-iso-f",
        r if r.starts_with("us-iso-") => "aws-iso",
        r if r.starts_with("eu-isoe-") => "aws-iso-e",
        _ => "aws",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "arn:aws:lambda:eu-west-1:123456789012:function:nudge";
    const Q: &str = "arn:aws:sqs:eu-west-1:123456789012:work.fifo";
    const B: &str = "arn:aws:events:us-east-1:123456789012:event-bus/product";

    #[test]
    fn each_service_is_its_target_and_empty_entries_are_ignored() {
        let r = parse_routes(&format!("pulse,sched={F};; utc-daily={Q}\n report={B} ")).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].kinds, ["pulse", "sched"]);
        assert_eq!(r[0].target, Target::Function { arn: F.into(), region: "eu-west-1".into() });
        assert_eq!(
            r[1].target,
            Target::Queue {
                arn: Q.into(),
                region: "eu-west-1".into(),
                url: "https://sqs.eu-west-1.amazonaws.com/123456789012/work.fifo".into(),
                fifo: true
            }
        );
        assert_eq!(r[2].target, Target::Bus { arn: B.into(), region: "us-east-1".into() });
        assert!(parse_routes("").unwrap().is_empty());
        assert!(parse_routes(" ; ").unwrap().is_empty());
    }

    #[test]
    fn a_setting_that_cannot_be_right_is_refused_naming_its_entry() {
        for (s, why) in [
            (format!("pulse={F};pulse={Q}"), "routed twice"),
            (format!("={F}"), "names no kind"),
            (F.to_string(), "expected"),
            ("pulse=arn:aws:s3:::bucket".to_string(), "not an ARN with a region"),
            ("pulse=arn:aws:dynamodb:us-east-1:123456789012:table/t".to_string(), "service `dynamodb`"),
            ("pulse=arn:aws:lambda:us-east-1:123456789012:layer:x".to_string(), "must name a function"),
            ("pulse=arn:aws:events:us-east-1:123456789012:rule/x".to_string(), "must name a bus"),
            ("pulse=arn:aws:sqs:us-east-1:123456789012:a/b".to_string(), "queue name"),
            ("pulse=arn:aws:sqs:us-east-1:123456789012:q.fifo.fifo".to_string(), "queue name"),
            ("pulse=arn:aws:lambda:us-east-1:123456789012:function:a.b".to_string(), "function name"),
            ("pulse=arn:aws:lambda:us-east-1:123456789012:function:f:".to_string(), "qualifier"),
            ("pulse=arn:aws:lambda:useast1:123456789012:function:f".to_string(), "not a region"),
            ("pulse=arn:aws:lambda:us-east-1:1:function:f".to_string(), "account id"),
            (format!("pul#se={F}"), "kind `pul#se`"),
        ] {
            let e = parse_routes(&s).unwrap_err();
            assert!(e.to_string().contains(why), "{s}: {e}");
            assert!(e.to_string().contains("target entry"), "{e}");
        }
    }

    #[test]
    fn a_function_may_carry_an_alias_and_a_china_queue_its_domain() {
        assert!(parse_arn("arn:aws:lambda:us-east-1:123456789012:function:f:live").is_ok());
        assert!(parse_arn("arn:aws:events:us-east-1:123456789012:event-bus/aws.partner/saas.com/1/x").is_ok());
        let Target::Queue { url, .. } = parse_arn("arn:aws-iso-e:sqs:eu-isoe-west-1:123456789012:q").unwrap() else {
            panic!()
        };
        assert_eq!(url, "https://sqs.eu-isoe-west-1.cloud.adc-e.uk/123456789012/q");
        assert!(parse_arn("arn:aws:lambda:us-gov-west-1:123456789012:function:f:$LATEST").is_ok());
        assert!(parse_arn(&format!("arn:aws:sqs:us-east-1:123456789012:{}", "q".repeat(80))).is_ok());
        assert!(parse_arn(&format!("arn:aws:sqs:us-east-1:123456789012:{}.fifo", "q".repeat(76))).is_err());
        let Target::Queue { url, fifo, .. } = parse_arn("arn:aws-cn:sqs:cn-north-1:123456789012:q").unwrap() else {
            panic!()
        };
        assert_eq!(url, "https://sqs.cn-north-1.amazonaws.com.cn/123456789012/q");
        assert!(!fifo);
    }
}
