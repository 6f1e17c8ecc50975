//! Moving schedules over from EventBridge Scheduler or a crontab (`tickctl schedules import
//! --from-scheduler FILE`, `--from-crontab FILE --zone Z --tenant T`): each source schedule read
//! into a tickwork schedule, or refused by name with what has no equivalent. Pure: the command
//! writes what comes out through the library (docs/migrate.md).
//!
//! EventBridge Scheduler ("Schedule types", EventBridge Scheduler User Guide): `cron(m h dom mon
//! dow year)` with `?` for "any" and days of the week numbered 1 (Sunday) to 7, `rate(n unit)`,
//! `at(yyyy-mm-ddThh:mm:ss)`, each in `ScheduleExpressionTimezone` (UTC by default); a
//! `FlexibleTimeWindow` of `MaximumWindowInMinutes` spreads invocations across that window, which
//! is what tickwork's spread does for the tenants sharing a spec. A crontab line is Vixie cron's
//! five fields and a command, or an `@` nickname; `CRON_TZ=` sets the zone of the lines after it.

use serde_json::Value;
use tickwork::schedules::Fold;

/// A schedule to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Where it came from (the Scheduler schedule's name, or `line N`).
    pub source: String,
    /// The tenant.
    pub tenant: String,
    /// Its name.
    pub name: String,
    /// Its spec, as tickwork reads it.
    pub spec: String,
    /// Its spread, minutes.
    pub spread_min: u32,
    /// The zone its times are in: the tenant's must be this one.
    pub zone: String,
    /// Delivered with every fire (the Scheduler target's input, a crontab line's command).
    pub payload: Option<Value>,
    /// The fold policy the source had, when it is not tickwork's default for the spec:
    /// Scheduler runs a repeated time once, at its first pass, whatever the expression.
    pub fold: Option<Fold>,
}

/// Something with no tickwork equivalent, by name, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Which one.
    pub source: String,
    /// Why.
    pub reason: String,
}

/// How Scheduler schedules become a tenant's.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// The field of the target's JSON input that holds the tenant's id.
    pub tenant_field: String,
    /// The one target every fire goes to; `None`: the first schedule's (tickwork delivers a kind
    /// to one target, so a schedule with a target of its own has no equivalent).
    pub target: Option<String>,
}

fn refused(source: &str, reason: impl Into<String>) -> Refused {
    Refused { source: source.to_string(), reason: reason.into() }
}

/// The zone `row` is written in, given its tenant as stored (`None`: not there; `Err`: its item
/// does not read), or why it is refused: a tenant's schedules follow its zone, so a row whose
/// times are in another zone has no equivalent. Pure.
pub fn tenant_zone(row: &Row, stored: Option<&Result<tickwork::tenants::Tenant, String>>) -> Result<String, String> {
    match stored {
        None => Err(format!(
            "no tenant `{}` (add it first: tickctl tenants add {} --zone {})",
            row.tenant, row.tenant, row.zone
        )),
        Some(Err(why)) => Err(format!("tenant `{}` does not read: {why}", row.tenant)),
        Some(Ok(t)) if t.zone != row.zone => Err(format!(
            "its times are in {}, its tenant `{}` is in {}: a tenant's schedules follow its zone",
            row.zone, row.tenant, t.zone
        )),
        Some(Ok(t)) => Ok(t.zone.clone()),
    }
}

/// Scheduler's day of week (1 = Sunday … 7 = Saturday) as cron's (0 = Sunday): numbers shift by
/// one, names stay. Pure.
fn weekdays(field: &str) -> Result<String, String> {
    if field == "?" || field == "*" {
        return Ok("*".into());
    }
    if field.contains(['L', '#']) {
        return Err(format!("day of week `{field}` (a last or nth weekday) has no cron equivalent"));
    }
    let shift = |v: &str| -> Result<String, String> {
        match v.parse::<u32>() {
            Ok(n @ 1..=7) => Ok((n - 1).to_string()),
            Ok(n) => Err(format!("day of week {n} is not 1 (Sunday) to 7")),
            Err(_) => Ok(v.to_string()),
        }
    };
    let mut out = Vec::new();
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let range = match range.split_once('-') {
            Some((a, b)) => format!("{}-{}", shift(a)?, shift(b)?),
            None if range == "*" => "*".into(),
            // `a/n` runs to the week's end: 7 (Saturday) there, but cron's week runs to 7 as
            // Sunday, so the end is said (`2/2`, Monday, Wednesday, Friday, is `1-6/2`).
            None if step.is_some() => format!("{}-6", shift(range)?),
            None => shift(range)?,
        };
        out.push(match step {
            Some(s) => format!("{range}/{s}"),
            None => range,
        });
    }
    Ok(out.join(","))
}

/// A Scheduler `cron(…)` body as a tickwork spec. Pure.
pub fn scheduler_cron(body: &str) -> Result<String, String> {
    let f: Vec<&str> = body.split_whitespace().collect();
    let [m, h, dom, mon, dow, year] = f[..] else {
        return Err(format!("cron({body}) has {} fields, not Scheduler's six", f.len()));
    };
    if year != "*" {
        return Err(format!("a year field (`{year}`) has no equivalent: tickwork's crons repeat every year"));
    }
    // The last day of the month, at one time of day: tickwork's `monthly last`.
    if dom == "L" && mon == "*" && (dow == "?" || dow == "*") {
        let (Ok(h), Ok(m)) = (h.parse::<u32>(), m.parse::<u32>()) else {
            return Err(format!("cron({body}): the last day of the month at more than one time has no equivalent"));
        };
        return Ok(format!("monthly last {h:02}:{m:02}"));
    }
    if dom.contains(['L', 'W']) {
        return Err(format!("day of month `{dom}` (a last or nearest weekday) has no cron equivalent"));
    }
    let dom = if dom == "?" { "*" } else { dom };
    Ok(format!("cron {m} {h} {dom} {mon} {}", weekdays(dow)?))
}

/// A Scheduler expression as a tickwork spec (its zone is the schedule's own). Pure.
pub fn scheduler_expression(expr: &str) -> Result<String, String> {
    let expr = expr.trim();
    if let Some(body) = expr.strip_prefix("cron(").and_then(|r| r.strip_suffix(')')) {
        return scheduler_cron(body);
    }
    if let Some(body) = expr.strip_prefix("at(").and_then(|r| r.strip_suffix(')')) {
        let Some(minute) = body.strip_suffix(":00") else {
            return Err(format!("at({body}) names a second; tickwork's timers are to the minute"));
        };
        return Ok(format!("at {minute}"));
    }
    if expr.starts_with("rate(") {
        return Err(format!(
            "{expr} counts from when it was created in UTC and drifts against local time across a DST change: write it as a cron in the tenant's zone"
        ));
    }
    Err(format!("`{expr}` is not a Scheduler expression (cron, rate or at)"))
}

/// The schedules of an export: a `get-schedule` object, an array of them, `{"Schedules": […]}`,
/// or one object a line. Pure.
pub fn scheduler_schedules(text: &str) -> Result<Vec<Value>, String> {
    let one = |v: Value| -> Vec<Value> {
        match v {
            Value::Array(a) => a,
            Value::Object(mut o) if o.contains_key("Schedules") => match o.remove("Schedules") {
                Some(Value::Array(a)) => a,
                _ => Vec::new(),
            },
            other => vec![other],
        }
    };
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(one(v)),
        Err(_) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .enumerate()
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: not JSON: {e}", i + 1)))
            .collect(),
    }
}

/// Each Scheduler schedule as a tenant's tickwork schedule, or refused by name, at `now_ms`.
/// Pure.
pub fn from_scheduler(schedules: &[Value], o: &SchedulerOptions, now_ms: i64) -> (Vec<Row>, Vec<Refused>) {
    let (mut rows, mut out) = (Vec::new(), Vec::new());
    let mut target = o.target.clone();
    for s in schedules {
        let name = s["Name"].as_str().unwrap_or_default().to_string();
        let source = if name.is_empty() { "(a schedule without a Name)".to_string() } else { name.clone() };
        let row = (|| -> Result<Row, String> {
            let expr = s["ScheduleExpression"]
                .as_str()
                .ok_or("no ScheduleExpression (list-schedules gives summaries: export each with get-schedule)")?;
            let spec = scheduler_expression(expr)?;
            let zone = s["ScheduleExpressionTimezone"].as_str().unwrap_or("UTC").to_string();
            if let Some(local) = spec.strip_prefix("at ") {
                // Scheduler keeps a one-time schedule after it ran: imported, it would run again.
                let at = local
                    .parse::<jiff::civil::DateTime>()
                    .and_then(|dt| dt.to_zoned(jiff::tz::TimeZone::get(&zone)?))
                    .map_err(|e| format!("at({local}) in {zone}: {e}"))?;
                if at.timestamp().as_millisecond() <= now_ms {
                    return Err(format!("its instant {at} has passed (it ran, or was missed, in Scheduler): imported, it would fire now"));
                }
            }
            if s["State"].as_str() == Some("DISABLED") {
                return Err(
                    "it is DISABLED: import it once it is enabled (written paused, it would be live until the pause)"
                        .into(),
                );
            }
            for field in ["StartDate", "EndDate"] {
                if !s[field].is_null() {
                    return Err(format!("{field} has no equivalent: a tickwork schedule runs until it is removed"));
                }
            }
            let arn = s["Target"]["Arn"].as_str().unwrap_or_default();
            match &target {
                Some(t) if t != arn => {
                    return Err(format!(
                    "its target {arn} is not {t}: tickwork delivers every fire to the stack's one target for its kind"
                ))
                }
                Some(_) => {}
                None => target = Some(arn.to_string()),
            }
            let input = s["Target"]["Input"].as_str().unwrap_or("{}");
            let mut payload: Value =
                serde_json::from_str(input).map_err(|e| format!("its target's Input is not JSON: {e}"))?;
            let tenant = payload
                .as_object_mut()
                .and_then(|m| m.remove(&o.tenant_field))
                .and_then(|v| v.as_str().map(str::to_string))
                .ok_or_else(|| format!("its target's Input has no `{}` (the tenant's id)", o.tenant_field))?;
            let spread_min = match s["FlexibleTimeWindow"]["Mode"].as_str() {
                // A spread spreads a repeating spec's tenants; a timer fires at its instant.
                Some("FLEXIBLE") if spec.starts_with("at ") => 0,
                Some("FLEXIBLE") => s["FlexibleTimeWindow"]["MaximumWindowInMinutes"]
                    .as_u64()
                    .ok_or("a FLEXIBLE window without MaximumWindowInMinutes")?
                    as u32,
                _ => 0,
            };
            let payload = match payload {
                Value::Object(m) if m.is_empty() => None,
                other => Some(other),
            };
            Ok(Row {
                source: source.clone(),
                tenant,
                name: name.clone(),
                spec,
                spread_min,
                zone,
                payload,
                fold: Some(Fold::First),
            })
        })();
        match row {
            Ok(r) => rows.push(r),
            Err(reason) => out.push(refused(&source, reason)),
        }
    }
    (rows, out)
}

/// A crontab's lines as `tenant`'s schedules in `zone` (or a `CRON_TZ=` line's), each named after
/// its line and carrying its command as the payload; what has no equivalent refused by line. Pure.
pub fn from_crontab(text: &str, zone: &str, tenant: &str) -> (Vec<Row>, Vec<Refused>) {
    let (mut rows, mut out) = (Vec::new(), Vec::new());
    let mut zone = zone.to_string();
    for (i, line) in text.lines().enumerate() {
        let source = format!("line {}", i + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((var, value)) = line.split_once('=') {
            let var = var.trim();
            if !var.is_empty() && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                // Only CRON_TZ names the zone the times are in (cronie); TZ is the commands'.
                if var == "CRON_TZ" {
                    zone = value.trim().trim_matches(['"', '\'']).to_string();
                }
                continue;
            }
        }
        let (fields, command) = if let Some(nick) = line.strip_prefix('@') {
            let (nick, command) = nick.split_once(char::is_whitespace).unwrap_or((nick, ""));
            let fields = match nick {
                "yearly" | "annually" => "0 0 1 1 *",
                "monthly" => "0 0 1 * *",
                "weekly" => "0 0 * * 0",
                "daily" | "midnight" => "0 0 * * *",
                "hourly" => "0 * * * *",
                other => {
                    out.push(refused(
                        &source,
                        format!("@{other} has no equivalent (nothing starts tickwork's schedules at a boot)"),
                    ));
                    continue;
                }
            };
            (fields.to_string(), command.trim().to_string())
        } else {
            let parts: Vec<&str> = line.split_whitespace().collect();
            if parts.len() < 6 {
                out.push(refused(&source, "fewer than five time fields and a command"));
                continue;
            }
            (parts[..5].join(" "), parts[5..].join(" "))
        };
        // An unescaped `%` ends the command; what follows is its standard input, lines split at
        // each further `%` (crontab(5)).
        let (command, stdin) = split_percent(&command);
        let mut payload = serde_json::json!({ "command": command });
        if let Some(stdin) = stdin {
            payload["stdin"] = stdin.into();
        }
        rows.push(Row {
            source: source.clone(),
            tenant: tenant.to_string(),
            name: format!("cron-line-{}", i + 1),
            spec: format!("cron {fields}"),
            spread_min: 0,
            zone: zone.clone(),
            payload: Some(payload),
            // cronie's rule: a wildcard line runs in each pass of a repeated hour (the spec's
            // default), a fixed time once.
            fold: None,
        });
    }
    (rows, out)
}

/// A crontab command split at its first unescaped `%`: the command (`\\%` unescaped), and its
/// standard input (each further unescaped `%` a newline). Pure.
fn split_percent(text: &str) -> (String, Option<String>) {
    let (mut command, mut stdin, mut escaped) = (String::new(), None::<String>, false);
    for c in text.chars() {
        let into = match stdin.as_mut() {
            Some(s) => s,
            None => &mut command,
        };
        match (c, escaped) {
            ('\\', false) => escaped = true,
            ('%', true) => {
                into.push('%');
                escaped = false;
            }
            ('%', false) => match stdin.as_mut() {
                Some(s) => s.push('\n'),
                None => stdin = Some(String::new()),
            },
            (c, e) => {
                if e {
                    into.push('\\');
                }
                into.push(c);
                escaped = false;
            }
        }
    }
    (command, stdin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_expressions_become_specs_and_what_has_none_says_why() {
        assert_eq!(scheduler_expression("cron(30 9 ? * MON-FRI *)").unwrap(), "cron 30 9 * * MON-FRI");
        assert_eq!(scheduler_expression("cron(0 8 ? * 2-6 *)").unwrap(), "cron 0 8 * * 1-5", "1 is Sunday there");
        assert_eq!(scheduler_expression("cron(0 8 ? * 1,7 *)").unwrap(), "cron 0 8 * * 0,6");
        assert_eq!(
            scheduler_expression("cron(0 8 ? * 2/2 *)").unwrap(),
            "cron 0 8 * * 1-6/2",
            "Mon, Wed, Fri; not Sunday"
        );
        assert_eq!(scheduler_expression("cron(0/15 * * * ? *)").unwrap(), "cron 0/15 * * * *");
        assert_eq!(scheduler_expression("cron(0 18 L * ? *)").unwrap(), "monthly last 18:00");
        assert_eq!(scheduler_expression("at(2026-12-24T09:00:00)").unwrap(), "at 2026-12-24T09:00");
        for (expr, says) in [
            ("rate(1 day)", "drifts"),
            ("cron(0 8 ? * 2#1 *)", "nth weekday"),
            ("cron(0 8 1W * ? *)", "nearest weekday"),
            ("cron(0 8 * * ? 2027)", "year"),
            ("cron(0 8 * * ?)", "six"),
            ("at(2026-12-24T09:00:30)", "second"),
            ("every day", "not a Scheduler expression"),
        ] {
            let e = scheduler_expression(expr).unwrap_err();
            assert!(e.contains(says), "{expr}: {e}");
        }
    }

    #[test]
    fn a_row_is_written_in_its_tenants_zone_or_refused_saying_why() {
        let row = |zone: &str| Row {
            source: "s".into(),
            tenant: "acme".into(),
            name: "n".into(),
            spec: "daily 08:00".into(),
            spread_min: 0,
            zone: zone.into(),
            payload: None,
            fold: None,
        };
        let berlin = Ok(tickwork::tenants::Tenant::new("acme", "Europe/Berlin"));
        assert_eq!(tenant_zone(&row("Europe/Berlin"), Some(&berlin)).unwrap(), "Europe/Berlin");
        assert!(tenant_zone(&row("Asia/Tokyo"), Some(&berlin)).unwrap_err().contains("is in Europe/Berlin"));
        assert!(tenant_zone(&row("UTC"), None).unwrap_err().contains("no tenant `acme`"));
        assert!(tenant_zone(&row("UTC"), Some(&Err("bad position".into()))).unwrap_err().contains("does not read"));
    }

    #[test]
    fn a_crontab_becomes_one_tenants_schedules_in_its_zone() {
        let text = "# nightly jobs\nMAILTO=ops\nTZ=UTC\n0 2 * * * /bin/backup --all\nCRON_TZ = Asia/Tokyo\n@daily report\n@reboot warm\n5 *\n30 4 * * * mail -s hi ops%line one%line two\n";
        let (rows, out) = from_crontab(text, "Europe/Berlin", "ops");
        let got: Vec<(&str, &str, &str)> =
            rows.iter().map(|r| (r.name.as_str(), r.spec.as_str(), r.zone.as_str())).collect();
        assert_eq!(
            got,
            [
                ("cron-line-4", "cron 0 2 * * *", "Europe/Berlin"),
                ("cron-line-6", "cron 0 0 * * *", "Asia/Tokyo"),
                ("cron-line-9", "cron 30 4 * * *", "Asia/Tokyo")
            ],
            "TZ is the commands' own; CRON_TZ (spaces or not) the times'"
        );
        assert_eq!(rows[0].payload, Some(serde_json::json!({"command": "/bin/backup --all"})));
        assert_eq!(
            rows[2].payload,
            Some(serde_json::json!({"command": "mail -s hi ops", "stdin": "line one\nline two"}))
        );
        let why: Vec<&str> = out.iter().map(|r| r.source.as_str()).collect();
        assert_eq!(why, ["line 7", "line 8"]);
    }
}
