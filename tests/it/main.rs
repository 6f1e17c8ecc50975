//! Integration tests against the real local servers (`make test` starts them).
//!
//! One test binary, one module per concern; every test makes its own uniquely named tables.

/// The local server applies each request atomically (the moto lock), or nothing else here means anything.
mod atomicity;
/// Estimated capacity against dynalite's, and EMF output.
mod capacity;
/// Claim / complete idempotency records.
mod idempotency;
/// Lease, fencing, slot records, watermark.
mod lease;
/// Pagination to exhaustion and resumable cursors.
mod pager;
/// Throttling retries and the no-retry probe client.
mod retry;
