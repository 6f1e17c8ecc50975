//! The sweep's `ScheduleWrites` event source mapping, standing in for Lambda's over the local
//! server's stream of the control table ([`lambda_standin::streams`], the template's filter): the
//! writers' due records handed to the sweep's function, which lowers `sched_next`. On AWS the
//! mapping runs within a second or so of a write; a test hands them over before each tick.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use lambda_standin::streams::StreamMapping;

use crate::Local;

/// One mapping per control table (its position in the stream), across a test's calls.
fn mappings() -> &'static Mutex<HashMap<String, Arc<StreamMapping>>> {
    static M: OnceLock<Mutex<HashMap<String, Arc<StreamMapping>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Hands every writer's record written since the last call to `deps`' sweep (its handler, as the
/// mapping invokes it); how many. A batch the sweep fails (a fault injected in its client) is an
/// error here, and handed over again at the next call.
pub async fn pump(sdk: &aws_config::SdkConfig, deps: &pulse_sweep::Deps) -> anyhow::Result<usize> {
    let table = deps.tables.control.clone();
    let mapping = {
        let mut all = mappings().lock().unwrap();
        match all.get(&table) {
            Some(m) => m.clone(),
            None => {
                let m = Arc::new(StreamMapping::new(sdk, &table, &[pulse_sweep::lowering::FILTER], 1000)?);
                all.insert(table.clone(), m.clone());
                m
            }
        }
    };
    // Boxed: the SDK's futures and the sweep's handler held inline outgrow a test thread's stack.
    Box::pin(
        mapping.pump(|event| async move { Box::pin(pulse_sweep::handle(deps, event, i64::MAX)).await.map(|_| ()) }),
    )
    .await
}

/// [`pump`], which must succeed. Run as a task of its own: polled from the runtime, not from
/// inside the test's future, whose depth with the SDK's and the sweep's futures on top outgrew a
/// test thread's stack (debug builds).
pub async fn settle(local: &Local, deps: &pulse_sweep::Deps) -> usize {
    let (sdk, deps) = (local.sdk.clone(), deps.clone());
    let task = tokio::spawn(async move { pump(&sdk, &deps).await.map_err(|e| e.to_string()) });
    task.await.expect("the mapping's task").expect("the control table's stream handed to the sweep")
}
