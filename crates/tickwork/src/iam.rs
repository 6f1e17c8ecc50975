//! What IAM will be asked to allow: every call a function makes, as the actions AWS authorises.
//!
//! Why: the local servers enforce no IAM, so a policy that misses an action passes every local
//! test and fails on the first real deployment. The archiver's role once granted `UpdateItem` but
//! not `PutItem` on the control table while its intent was a `Put` inside `TransactWriteItems`:
//! the S3 put succeeded, the intent got AccessDenied, and nothing was ever deleted. So a
//! [`Recorder`] sits at the SDK boundary (an interceptor, so nothing in the code under test
//! changes) and turns each request into the [`Access`]es IAM evaluates, following AWS's rules:
//!
//! - *TransactWriteItems / TransactGetItems* have no IAM action of their own; "each action in the
//!   transaction requires the permission of the corresponding single-item API":
//!   `Put` → `dynamodb:PutItem`, `Update` → `dynamodb:UpdateItem`, `Delete` →
//!   `dynamodb:DeleteItem`, `ConditionCheck` → `dynamodb:ConditionCheckItem`, `Get` →
//!   `dynamodb:GetItem` (DynamoDB Developer Guide, "Using IAM with DynamoDB transactions").
//! - *BatchWriteItem / BatchGetItem* are authorised as `dynamodb:BatchWriteItem` /
//!   `dynamodb:BatchGetItem` on each table named in the request (Service Authorization
//!   Reference, "Actions defined by Amazon DynamoDB"); each item is recorded so that its
//!   partition key is checked against `dynamodb:LeadingKeys`.
//! - *Query* on an index is authorised on the index ARN `table/<t>/index/<i>`; a grant on the
//!   table ARN does not cover its indexes (Developer Guide, "Fine-grained access control" and
//!   the Service Authorization Reference's `index` resource type).
//! - `dynamodb:LeadingKeys` holds the partition key values a request touches: the item key of a
//!   single-item call or of each batch/transaction item, the partition key of a Query's key
//!   condition (Developer Guide, "Using IAM policy conditions for fine-grained access control").
//!
//! S3 calls are mapped by the crate that makes them (see `archiver`), Lambda calls by
//! `tickwork-lambda`, through [`Recorder::map`].
//!
//! ## Every call any test makes
//! A recorder built for a scenario records what its client is asked. Beside it, the **suite
//! log** ([`suite_recorder`]) records every call that any client makes while a function's code
//! runs: each function's entry points run under [`acting_as`] its role (a task-local, so
//! nothing in the code under test is told it is recorded), and every client the project builds
//! (`tickwork::retry::work_client`, the archiver's S3 client, the Lambda clients, the tests'
//! clients) carries the suite recorder when [`IAM_LOG`] names a directory. `make test` and
//! `make chaos` set it; a check then holds the union of everything recorded, per role, against
//! `template.yaml` (`tests/it/iam.rs`): a code path is covered the day a test reaches it.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

use aws_sdk_dynamodb::config::interceptors::BeforeSerializationInterceptorContextRef;
use aws_sdk_dynamodb::config::{ConfigBag, Intercept};
use aws_sdk_dynamodb::types::AttributeValue;

/// The partition key attribute of every table (`crate::schema::PK`, named here so that this
/// module stays a leaf: the clients' builder, `crate::retry`, depends on it).
const PK: &str = "pk";

/// A request as an interceptor sees it (type-erased; mappers downcast it).
pub use aws_smithy_runtime_api::client::interceptors::context::Input;

/// One thing IAM is asked to allow.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct Access {
    /// `dynamodb:PutItem`, `s3:PutObject`, ...
    pub action: String,
    /// What it acts on.
    pub resource: Resource,
    /// The partition key value, where `dynamodb:LeadingKeys` applies (base-table item calls and
    /// base-table Queries), else `None`.
    pub leading_key: Option<String>,
}

/// The resource of an [`Access`], named as the policy names it (logical names are resolved by the
/// caller that knows which physical table is which).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum Resource {
    /// A table, or one of its indexes.
    Table {
        /// Physical table name.
        table: String,
        /// Index name.
        index: Option<String>,
    },
    /// An S3 object (`bucket/key`).
    Object {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
    },
    /// An S3 bucket (list).
    Bucket {
        /// Bucket.
        bucket: String,
    },
    /// A Lambda function (invoke).
    Function {
        /// Its name.
        name: String,
    },
    /// An EventBridge Scheduler schedule (in the default group).
    Schedule {
        /// Its name.
        name: String,
    },
    /// An SQS queue (a worker's target).
    Queue {
        /// Its ARN.
        arn: String,
    },
    /// An EventBridge event bus (a worker's target).
    Bus {
        /// Its ARN.
        arn: String,
    },
    /// An IAM role passed to a service.
    Role {
        /// Its ARN.
        arn: String,
    },
}

/// The variable naming the suite log's directory (unset: no suite log).
pub use crate::env::IAM_LOG;

tokio::task_local! {
    static ROLE: &'static str;
}

/// Runs `f` as the function `role` (`pulse-sweep`, `tenant-fanout`, `queue-worker`,
/// `archiver`): the calls it makes go to the suite log under that role. Nested, the outer role
/// stands.
pub async fn acting_as<F: std::future::Future>(role: &'static str, f: F) -> F::Output {
    if ROLE.try_with(|_| ()).is_ok() {
        f.await
    } else {
        ROLE.scope(role, f).await
    }
}

/// The role the current task acts as, if any.
pub fn role() -> Option<&'static str> {
    ROLE.try_with(|r| *r).ok()
}

/// One line of the suite log.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Logged {
    /// The function's role.
    pub role: String,
    /// The process that made the call (its executable's name).
    pub exe: String,
    /// The access.
    pub access: Access,
}

/// The suite recorder, when [`IAM_LOG`] names a directory: one per process, shared by every
/// client, appending what it sees to `<dir>/<pid>.jsonl`.
pub fn suite_recorder() -> Option<Recorder> {
    static SUITE: OnceLock<Option<Recorder>> = OnceLock::new();
    SUITE
        .get_or_init(|| {
            let dir = std::env::var(IAM_LOG).ok().filter(|d| !d.is_empty())?;
            std::fs::create_dir_all(&dir).ok()?;
            let file = std::path::Path::new(&dir).join(format!("{}.jsonl", std::process::id()));
            Some(Recorder { suite: Some(Arc::new(SuiteLog { file, seen: Default::default() })), ..Recorder::default() })
        })
        .clone()
}

/// The suite log's sink.
#[derive(Debug)]
struct SuiteLog {
    file: std::path::PathBuf,
    seen: Mutex<HashSet<(String, Access)>>,
}

impl SuiteLog {
    fn write(&self, role: &str, accesses: &[Access]) {
        let exe = std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let mut seen = self.seen.lock().expect("iam suite log");
        let mut lines = String::new();
        for a in accesses {
            if seen.insert((role.to_string(), a.clone())) {
                let l = Logged { role: role.to_string(), exe: exe.clone(), access: a.clone() };
                lines.push_str(&serde_json::to_string(&l).expect("a log line serialises"));
                lines.push('\n');
            }
        }
        if lines.is_empty() {
            return;
        }
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.file)
            .and_then(|mut f| f.write_all(lines.as_bytes()));
        if let Err(e) = written {
            tracing::warn!(file = %self.file.display(), error = %e, "IAM suite log not written");
        }
    }
}

/// Reads every suite log in `dir`.
pub fn read_suite_log(dir: &std::path::Path) -> std::io::Result<Vec<Logged>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.extension().is_some_and(|x| x == "jsonl") {
            for line in std::fs::read_to_string(&path)?.lines().filter(|l| !l.trim().is_empty()) {
                out.push(
                    serde_json::from_str(line)
                        .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?,
                );
            }
        }
    }
    Ok(out)
}

/// Maps one request (its typed input, type-erased) to the accesses IAM evaluates, or `None` when
/// the mapper does not know the input's type.
pub type Mapper = fn(&Input) -> Option<Vec<Access>>;

/// Records what a client is asked to do, per function. Cheap to clone (shared log).
#[derive(Debug, Clone)]
pub struct Recorder {
    log: Arc<Mutex<BTreeSet<Access>>>,
    unknown: Arc<Mutex<BTreeSet<String>>>,
    mappers: Vec<Mapper>,
    /// The suite log ([`suite_recorder`]): only calls made under a role, written out.
    suite: Option<Arc<SuiteLog>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self { log: Default::default(), unknown: Default::default(), mappers: vec![dynamodb_accesses], suite: None }
    }
}

impl Recorder {
    /// A recorder that maps DynamoDB requests.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a mapper for another service's requests (S3).
    pub fn map(mut self, m: Mapper) -> Self {
        self.mappers.push(m);
        self
    }

    /// Everything recorded so far.
    pub fn accesses(&self) -> BTreeSet<Access> {
        self.log.lock().expect("iam log").clone()
    }

    /// Requests no mapper understood (a test fails on any: an unmapped call is an unchecked one).
    pub fn unmapped(&self) -> BTreeSet<String> {
        self.unknown.lock().expect("iam log").clone()
    }

    fn record(&self, input: &aws_smithy_runtime_api::client::interceptors::context::Input, op: &str) {
        let role = match &self.suite {
            None => None,
            Some(log) => match role() {
                Some(r) => Some((log, r)),
                // Outside a function's code: a test's own setup, an operator's tool.
                None => return,
            },
        };
        for m in &self.mappers {
            if let Some(a) = m(input) {
                if let Some((log, r)) = role {
                    log.write(r, &a);
                }
                self.log.lock().expect("iam log").extend(a);
                return;
            }
        }
        if let Some((log, r)) = role {
            // An unmapped call is an unchecked one: logged as such, and the check fails on it.
            log.write(
                r,
                &[Access {
                    action: format!("unmapped:{op}"),
                    resource: Resource::Bucket { bucket: String::new() },
                    leading_key: None,
                }],
            );
        }
        self.unknown.lock().expect("iam log").insert(op.to_string());
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "IamRecorder"
    }

    fn read_before_execution(
        &self,
        ctx: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let op = cfg
            .load::<aws_smithy_runtime_api::client::orchestrator::Metadata>()
            .map(|m| format!("{}:{}", m.service(), m.name()))
            .unwrap_or_else(|| "?".into());
        self.record(ctx.input(), &op);
        Ok(())
    }
}

fn pk_of(key: Option<&HashMap<String, AttributeValue>>) -> Option<String> {
    key.and_then(|k| k.get(PK)).and_then(|v| v.as_s().ok()).cloned()
}

fn table(action: &str, table: &str, index: Option<&str>, leading_key: Option<String>) -> Access {
    Access {
        action: format!("dynamodb:{action}"),
        resource: Resource::Table { table: table.to_string(), index: index.map(str::to_string) },
        leading_key: if index.is_some() { None } else { leading_key },
    }
}

/// The partition key value a base-table Query's key condition names (`#pk = :v` or `pk = :v`).
fn query_partition(
    expr: Option<&str>,
    names: Option<&HashMap<String, String>>,
    values: Option<&HashMap<String, AttributeValue>>,
) -> Option<String> {
    let expr = expr?;
    for clause in expr.split(" AND ").chain(expr.split(" and ")) {
        let Some((l, r)) = clause.split_once('=') else { continue };
        let (l, r) = (l.trim(), r.trim());
        let attr =
            if let Some(n) = l.strip_prefix('#') { names?.get(&format!("#{n}")).cloned() } else { Some(l.into()) };
        if attr.as_deref() == Some(PK) {
            return values?.get(r).and_then(|v| v.as_s().ok()).cloned();
        }
    }
    None
}

/// DynamoDB requests → accesses (see the module docs for the rules).
pub fn dynamodb_accesses(input: &aws_smithy_runtime_api::client::interceptors::context::Input) -> Option<Vec<Access>> {
    use aws_sdk_dynamodb::operation as op;
    if let Some(i) = input.downcast_ref::<op::get_item::GetItemInput>() {
        return Some(vec![table("GetItem", i.table_name()?, None, pk_of(i.key()))]);
    }
    if let Some(i) = input.downcast_ref::<op::put_item::PutItemInput>() {
        return Some(vec![table("PutItem", i.table_name()?, None, pk_of(i.item()))]);
    }
    if let Some(i) = input.downcast_ref::<op::update_item::UpdateItemInput>() {
        return Some(vec![table("UpdateItem", i.table_name()?, None, pk_of(i.key()))]);
    }
    if let Some(i) = input.downcast_ref::<op::delete_item::DeleteItemInput>() {
        return Some(vec![table("DeleteItem", i.table_name()?, None, pk_of(i.key()))]);
    }
    if let Some(i) = input.downcast_ref::<op::query::QueryInput>() {
        let pk = query_partition(
            i.key_condition_expression(),
            i.expression_attribute_names(),
            i.expression_attribute_values(),
        );
        return Some(vec![table("Query", i.table_name()?, i.index_name(), pk)]);
    }
    if let Some(i) = input.downcast_ref::<op::scan::ScanInput>() {
        return Some(vec![table("Scan", i.table_name()?, i.index_name(), None)]);
    }
    if let Some(i) = input.downcast_ref::<op::batch_write_item::BatchWriteItemInput>() {
        let mut out = Vec::new();
        for (t, reqs) in i.request_items()? {
            for r in reqs {
                let pk = r
                    .put_request()
                    .and_then(|p| p.item().get(PK))
                    .or_else(|| r.delete_request().and_then(|d| d.key().get(PK)))
                    .and_then(|v| v.as_s().ok())
                    .cloned();
                out.push(table("BatchWriteItem", t, None, pk));
            }
        }
        return Some(out);
    }
    if let Some(i) = input.downcast_ref::<op::batch_get_item::BatchGetItemInput>() {
        let mut out = Vec::new();
        for (t, ka) in i.request_items()? {
            for k in ka.keys() {
                out.push(table("BatchGetItem", t, None, pk_of(Some(k))));
            }
        }
        return Some(out);
    }
    if let Some(i) = input.downcast_ref::<op::transact_write_items::TransactWriteItemsInput>() {
        let mut out = Vec::new();
        for it in i.transact_items() {
            if let Some(p) = it.put() {
                out.push(table("PutItem", p.table_name(), None, pk_of(Some(p.item()))));
            } else if let Some(u) = it.update() {
                out.push(table("UpdateItem", u.table_name(), None, pk_of(Some(u.key()))));
            } else if let Some(d) = it.delete() {
                out.push(table("DeleteItem", d.table_name(), None, pk_of(Some(d.key()))));
            } else if let Some(c) = it.condition_check() {
                out.push(table("ConditionCheckItem", c.table_name(), None, pk_of(Some(c.key()))));
            }
        }
        return Some(out);
    }
    if let Some(i) = input.downcast_ref::<op::transact_get_items::TransactGetItemsInput>() {
        return Some(
            i.transact_items()
                .iter()
                .filter_map(|t| t.get())
                .map(|g| table("GetItem", g.table_name(), None, pk_of(Some(g.key()))))
                .collect(),
        );
    }
    // Control-plane calls: the action named after the operation, on the table.
    macro_rules! control {
        ($($m:ident :: $t:ident => $name:literal),* $(,)?) => {$(
            if let Some(i) = input.downcast_ref::<op::$m::$t>() {
                return Some(vec![table($name, i.table_name().unwrap_or("*"), None, None)]);
            }
        )*};
    }
    control!(
        create_table::CreateTableInput => "CreateTable",
        describe_table::DescribeTableInput => "DescribeTable",
        delete_table::DeleteTableInput => "DeleteTable",
        update_time_to_live::UpdateTimeToLiveInput => "UpdateTimeToLive",
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_partition_key_is_the_schemas() {
        assert_eq!(PK, crate::schema::PK);
    }
    use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem, Update};
    use aws_smithy_runtime_api::client::interceptors::context::Input;

    fn s(v: &str) -> AttributeValue {
        AttributeValue::S(v.into())
    }

    #[test]
    fn transaction_items_are_the_single_item_actions() {
        let key = HashMap::from([(PK.to_string(), s("lease#j")), ("sk".to_string(), s("lease"))]);
        let cc = ConditionCheck::builder()
            .table_name("control")
            .set_key(Some(key.clone()))
            .condition_expression("x")
            .build()
            .unwrap();
        let put = Put::builder()
            .table_name("queue")
            .set_item(Some(HashMap::from([(PK.into(), s("pulse#t"))])))
            .build()
            .unwrap();
        let up = Update::builder()
            .table_name("control")
            .set_key(Some(HashMap::from([(PK.into(), s("wm#j"))])))
            .update_expression("SET a = :a")
            .build()
            .unwrap();
        let input = aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsInput::builder()
            .transact_items(TransactWriteItem::builder().condition_check(cc).build())
            .transact_items(TransactWriteItem::builder().put(put).build())
            .transact_items(TransactWriteItem::builder().update(up).build())
            .build()
            .unwrap();
        let got: Vec<(String, Option<String>)> =
            dynamodb_accesses(&Input::erase(input)).unwrap().into_iter().map(|a| (a.action, a.leading_key)).collect();
        assert_eq!(
            got,
            vec![
                ("dynamodb:ConditionCheckItem".into(), Some("lease#j".into())),
                ("dynamodb:PutItem".into(), Some("pulse#t".into())),
                ("dynamodb:UpdateItem".into(), Some("wm#j".into())),
            ]
        );
    }

    #[test]
    fn a_query_names_its_partition_or_its_index() {
        let names = HashMap::from([("#pk".to_string(), "pk".to_string())]);
        let values = HashMap::from([(":pk".to_string(), s("cursor#t1"))]);
        assert_eq!(query_partition(Some("#pk = :pk"), Some(&names), Some(&values)).as_deref(), Some("cursor#t1"));
        let input = aws_sdk_dynamodb::operation::query::QueryInput::builder()
            .table_name("tenants")
            .index_name("by_zone")
            .key_condition_expression("#s = :s")
            .build()
            .unwrap();
        let a = dynamodb_accesses(&Input::erase(input)).unwrap();
        assert_eq!(a[0].resource, Resource::Table { table: "tenants".into(), index: Some("by_zone".into()) });
        assert_eq!(a[0].leading_key, None, "LeadingKeys is not checked for index queries here");
    }
}
