//! Helpers for tests against the local servers started by `scripts/with-servers.sh`.
//!
//! Each test creates its own uniquely named tables (process id + counter), so tests run in
//! parallel without seeing each other. Tables are not deleted: the servers are started for one
//! `make test` run and discarded with everything in them.

pub mod eventbridge;
pub mod faults;
pub mod slow;
pub mod streams;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use aws_config::{BehaviorVersion, SdkConfig};
use tickwork::clock::{ManualClock, SharedClock};
use tickwork::meter::{CapacitySource, Meter};
use tickwork::retry::RetryPolicy;
use tickwork::schema::{self, TableDef};
use tickwork::Db;

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A name no other test (in this run or a parallel one) uses.
pub fn unique(name: &str) -> String {
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    format!("t{}-{n}-{name}", std::process::id())
}

/// The local server this test uses: one of `TICKWORK_MOTO_ENDPOINTS` (several servers spread the
/// tests over the cores), chosen by the test's thread name so that everything one test does goes
/// to one server; else `AWS_ENDPOINT_URL_DYNAMODB`.
pub fn test_endpoint() -> String {
    let all: Vec<String> = std::env::var("TICKWORK_MOTO_ENDPOINTS")
        .map(|v| v.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default();
    if all.len() < 2 {
        return endpoint("AWS_ENDPOINT_URL_DYNAMODB");
    }
    // One test per process (nextest) runs on the main thread: the process id tells tests apart.
    let name = format!("{}/{}", std::thread::current().name().unwrap_or("main"), std::process::id());
    all[(tickwork::shard::fnv1a(name.as_bytes()) % all.len() as u64) as usize].clone()
}

/// The SDK config for the local servers; fails with instructions when they are not running.
pub async fn sdk_config() -> SdkConfig {
    sdk_config_for(&test_endpoint()).await
}

/// The SDK config for a given DynamoDB endpoint (dynalite, for instance).
pub async fn sdk_config_for(dynamodb_endpoint: &str) -> SdkConfig {
    aws_config::defaults(BehaviorVersion::latest())
        // The local server answers one request at a time: under the suite's load a request can
        // wait seconds for its turn, which the SDK's stalled-stream protection (no byte for 5 s)
        // would take for a dead connection. DynamoDB answers in milliseconds.
        .stalled_stream_protection(aws_config::stalled_stream_protection::StalledStreamProtectionConfig::disabled())
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_credential_types::Credentials::new("test", "test", None, None, "tickwork-tests"))
        .endpoint_url(dynamodb_endpoint)
        .load()
        .await
}

/// An endpoint from the environment, or a panic that says how to get one.
pub fn endpoint(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests through `make test` (scripts/with-servers.sh starts the local servers)")
    })
}

/// A metered client on the local DynamoDB with its own retry partition.
pub struct Local {
    /// The server's endpoint (DynamoDB and S3).
    pub endpoint: String,
    /// SDK config.
    pub sdk: SdkConfig,
    /// Metered client (capacity estimated by DynamoDB's rules).
    pub db: Db,
    /// Test clock.
    pub clock: ManualClock,
}

impl Local {
    /// Connects to the local moto server.
    pub async fn new() -> Self {
        let endpoint = test_endpoint();
        let sdk = sdk_config_for(&endpoint).await;
        Self { endpoint, ..Self::with_sdk(sdk) }
    }

    /// Connects to the `i`-th local server (modulo their number): concurrent work inside one test
    /// spread over the servers.
    pub async fn on(i: usize) -> Self {
        let all: Vec<String> = std::env::var("TICKWORK_MOTO_ENDPOINTS")
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let endpoint = if all.is_empty() { endpoint("AWS_ENDPOINT_URL_DYNAMODB") } else { all[i % all.len()].clone() };
        let sdk = sdk_config_for(&endpoint).await;
        Self { endpoint, ..Self::with_sdk(sdk) }
    }

    /// How many local servers there are.
    pub fn servers() -> usize {
        std::env::var("TICKWORK_MOTO_ENDPOINTS").map(|v| v.split_whitespace().count().max(1)).unwrap_or(1)
    }

    /// Connects with a given config.
    pub fn with_sdk(sdk: SdkConfig) -> Self {
        let client = tickwork::retry::work_client(&sdk, &RetryPolicy::default(), &unique("partition"));
        let db = Db::new(client, Meter::new(CapacitySource::Estimate));
        let endpoint = sdk.endpoint_url().unwrap_or_default().to_string();
        Self { endpoint, sdk, db, clock: ManualClock::at(1_700_000_000_000) }
    }

    /// The test clock as a shared clock.
    pub fn clock(&self) -> SharedClock {
        Arc::new(self.clock.clone())
    }

    /// A fresh metered client on the same server, with its own meter.
    pub fn fresh_db(&self) -> Db {
        let client = tickwork::retry::work_client(&self.sdk, &RetryPolicy::default(), &unique("partition"));
        Db::new(client, Meter::new(CapacitySource::Estimate))
    }

    /// A fresh metered client whose requests pass through `faults` and `recorder` when given, with
    /// `retry` (tests shorten the backoff; the policy is otherwise the shipped one).
    pub fn db_with(
        &self,
        faults: Option<&faults::Faults>,
        recorder: Option<&tickwork::iam::Recorder>,
        retry: &RetryPolicy,
    ) -> Db {
        let mut b = aws_sdk_dynamodb::config::Builder::from(&self.sdk)
            .retry_config(retry.sdk())
            .retry_partition(aws_sdk_dynamodb::config::retry::RetryPartition::new(unique("partition")))
            .retry_classifier(tickwork::retry::ConflictClassifier);
        if let Some(f) = faults {
            b = b.interceptor(f.clone());
        }
        if let Some(r) = recorder {
            b = b.interceptor(r.clone());
        }
        if let Some(r) = tickwork::iam::suite_recorder() {
            b = b.interceptor(r);
        }
        Db::new(aws_sdk_dynamodb::Client::from_conf(b.build()), Meter::new(CapacitySource::Estimate))
    }

    /// A client on the local server through `interceptor` (a test's own fault or clock), its
    /// capacity estimated, `table`'s indexes known to the meter.
    pub fn db_intercepted(
        &self,
        interceptor: impl aws_smithy_runtime_api::client::interceptors::Intercept + 'static,
        table: &str,
        def: &TableDef,
    ) -> Db {
        let client = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.sdk).interceptor(interceptor).build(),
        );
        let db = Db::new(client, Meter::new(CapacitySource::Estimate));
        db.register_gsis(table, def.gsi_shapes());
        db
    }

    /// An S3 client on the local server through `faults` and `recorder` when given.
    pub fn s3_with(
        &self,
        faults: Option<&faults::Faults>,
        recorder: Option<&tickwork::iam::Recorder>,
    ) -> aws_sdk_s3::Client {
        let mut b = aws_sdk_s3::config::Builder::from(&self.sdk).force_path_style(true).retry_config(
            aws_sdk_s3::config::retry::RetryConfig::standard()
                .with_max_attempts(5)
                .with_initial_backoff(std::time::Duration::from_millis(5)),
        );
        if let Some(f) = faults {
            b = b.interceptor(f.clone());
        }
        if let Some(r) = recorder {
            b = b.interceptor(r.clone());
        }
        if let Some(r) = tickwork::iam::suite_recorder() {
            b = b.interceptor(r.map(archiver::object::s3_accesses));
        }
        aws_sdk_s3::Client::from_conf(b.build())
    }

    /// A Lambda client on a local Invoke API stand-in (`endpoint`), through `recorder` when given
    /// and the IAM suite log: how a function's own invocations reach the stand-in as they would
    /// reach Lambda.
    pub fn lambda_with(&self, endpoint: &str, recorder: Option<&tickwork::iam::Recorder>) -> aws_sdk_lambda::Client {
        let mut b = aws_sdk_lambda::config::Builder::from(&self.sdk).endpoint_url(endpoint);
        if let Some(r) = recorder {
            b = b.interceptor(r.clone().map(tickwork_lambda::lambda::lambda_accesses));
        }
        if let Some(r) = tickwork::iam::suite_recorder() {
            b = b.interceptor(r.map(tickwork_lambda::lambda::lambda_accesses));
        }
        aws_sdk_lambda::Client::from_conf(b.build())
    }

    /// A fresh metered client that knows `table`'s GSIs (for index write estimates).
    pub fn fresh_db_with_gsis(&self, table: &str, def: &TableDef) -> Db {
        let db = self.fresh_db();
        db.register_gsis(table, def.gsi_shapes());
        db
    }

    /// A fresh metered client whose every request is `delay` late ([`slow::Slow`]), that knows
    /// `table`'s GSIs: [`Local::fresh_db`] on a slow HTTP client.
    pub fn slow_db(&self, delay: std::time::Duration, table: &str, def: &TableDef) -> Db {
        let sdk = self.sdk.to_builder().http_client(slow::Slow::of(&self.sdk, delay)).build();
        let client = tickwork::retry::work_client(&sdk, &RetryPolicy::default(), &unique("partition"));
        let db = Db::new(client, Meter::new(CapacitySource::Estimate));
        db.register_gsis(table, def.gsi_shapes());
        db
    }

    /// Creates a uniquely named table from `def` and registers its GSIs with the meter.
    pub async fn table(&self, def: &TableDef) -> String {
        let name = unique(def.logical);
        schema::create_table(self.db.client(), def, &name).await.expect("create table");
        self.db.register_gsis(&name, def.gsi_shapes());
        name
    }

    /// A uniquely named control table.
    pub async fn control(&self) -> String {
        self.table(&schema::control_table()).await
    }

    /// The fan-out's three tables, each new.
    pub async fn fanout_tables(&self) -> tenant_fanout::Tables {
        tenant_fanout::Tables {
            control: self.control().await,
            tenants: self.table(&tickwork::tenants::tenants_table()).await,
            queue: self.table(&tickwork::queue::queue_table()).await,
        }
    }

    /// The pulse sweep's three tables, each new (the sweep's tests, the shard workers', the
    /// example job's).
    /// The pulse sweep of the stack `prefix` (the tables `tickctl provision` made there:
    /// `<prefix>-control`, `-tenants`, `-queue`), with `env` over the code's defaults, its calls
    /// through `faults` when given, and held against its policy by the IAM suite log.
    pub fn stack_sweep(
        &self,
        prefix: &str,
        env: &[(&str, &str)],
        faults: Option<&faults::Faults>,
    ) -> pulse_sweep::Deps {
        let tables = pulse_sweep::Tables {
            control: format!("{prefix}-control"),
            tenants: format!("{prefix}-tenants"),
            queue: format!("{prefix}-queue"),
        };
        let env = tickwork::config::Env::from_pairs(env.iter().copied());
        let cfg = pulse_sweep::PulseConfig::from_env(&env, std::time::Duration::from_secs(1)).expect("sweep settings");
        let db = self.db_with(faults, None, &RetryPolicy::default());
        pulse_sweep::Deps::new(db, self.clock(), cfg, tables, 8, tickwork::queue::QueueConfig::default())
    }

    pub async fn sweep_tables(&self) -> pulse_sweep::Tables {
        pulse_sweep::Tables {
            control: self.control().await,
            tenants: self.table(&tickwork::tenants::tenants_table()).await,
            queue: self.table(&tickwork::queue::queue_table()).await,
        }
    }
}

/// An RFC 3339 instant in epoch milliseconds (the tests' clocks).
pub fn ms(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// A retry policy with short waits, for tests that inject many retryable faults.
pub fn quick_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 8,
        initial_backoff: std::time::Duration::from_millis(2),
        max_backoff: std::time::Duration::from_millis(20),
    }
}

/// Writes a tenant's stored position as is, around every check (a corrupt value no reader
/// parses, or a repair): how the isolation tests make a bad tenant.
pub async fn set_stored_position(db: &Db, tenants_table: &str, tenant: &str, pos: &str) {
    let req = db
        .client()
        .update_item()
        .table_name(tenants_table)
        .key(schema::PK, schema::av_s(tenant))
        .update_expression("SET #pos = :p")
        .expression_attribute_names("#pos", tickwork::tenants::POS)
        .expression_attribute_values(":p", schema::av_s(pos));
    db.update(req).await.expect("set the stored position");
}

/// `n` active tenants of `zone`, ids `t` and `i` padded to `width` digits.
pub fn tenants(n: usize, zone: &str, width: usize) -> Vec<tickwork::tenants::Tenant> {
    (0..n)
        .map(|i| tickwork::tenants::Tenant {
            id: format!("t{i:0width$}"),
            zone: zone.into(),
            active: true,
            since_ms: None,
            pos: Default::default(),
        })
        .collect()
}

/// `ts` migrated onto tickwork, owed from the day before `now_ms` in each one's zone (as `tickctl
/// tenants add --owed-from` yesterday): the first boundary a test runs has yesterday's day to
/// pulse, and the week or month that ended at yesterday's end. A tenant added without it is owed
/// from its day of adding only, first pulsed at that day's end.
pub fn owed_from_yesterday(ts: Vec<tickwork::tenants::Tenant>, now_ms: i64) -> Vec<tickwork::tenants::Tenant> {
    ts.into_iter()
        .map(|t| {
            let tz = tickwork::calendar::zone(&t.zone).expect("a zone");
            let yesterday = tickwork::calendar::local_date(now_ms, &tz).unwrap().yesterday().unwrap();
            let policy = tickwork::calendar::Policy {
                catch_up: tickwork::calendar::CatchUp::All,
                max_lateness_ms: 40 * 86_400_000,
                interval_ms: 60_000,
            };
            t.owed_from(yesterday, now_ms, &policy).expect("within the lateness bound")
        })
        .collect()
}

/// Counts the items of `table` whose `attr` equals `value`, by a paginated Scan (test-only: the
/// product code never scans).
pub async fn count_where(db: &Db, table: &str, attr: &str, value: &str) -> usize {
    tickwork_sim::scan_all(db, table)
        .await
        .expect("scan")
        .iter()
        .filter(|i| i.get(attr).and_then(|v| v.as_s().ok()).map(String::as_str) == Some(value))
        .count()
}
