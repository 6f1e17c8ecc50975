//! Restore: archived objects back into a table (operator recovery).
//!
//! Rows are put as they were, so restoring twice changes nothing. Every object under the prefix is
//! listed by continuation token to the end.

use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
use tickwork::Db;

use crate::object::decode_batch;
use crate::report::ArchiveError;

/// Restores every row of the archived objects under `prefix` in `bucket` back into `table`.
/// Returns rows restored.
pub async fn restore(
    s3: &aws_sdk_s3::Client,
    bucket: &str,
    prefix: &str,
    db: &Db,
    table: &str,
) -> Result<u64, ArchiveError> {
    let s3_err =
        |key: &str, e: String| ArchiveError::S3 { bucket: bucket.to_string(), key: key.to_string(), reason: e };
    let mut restored = 0u64;
    let mut token = None;
    loop {
        let page = s3
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .set_continuation_token(token.take())
            .send()
            .await
            .map_err(|e| s3_err(prefix, aws_sdk_s3::error::DisplayErrorContext(&e).to_string()))?;
        for obj in page.contents() {
            let key = obj.key().unwrap_or_default();
            let got = s3
                .get_object()
                .bucket(bucket)
                .key(key)
                .send()
                .await
                .map_err(|e| s3_err(key, aws_sdk_s3::error::DisplayErrorContext(&e).to_string()))?;
            let bytes = got.body.collect().await.map_err(|e| s3_err(key, e.to_string()))?.into_bytes();
            let items = decode_batch(&bytes).map_err(|e| s3_err(key, e))?;
            restored += items.len() as u64;
            let puts: Vec<WriteRequest> = items
                .into_iter()
                .map(|i| {
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(i)).build().expect("item"))
                        .build()
                })
                .collect();
            db.batch_write_all(table, puts, 10).await?;
        }
        match page.next_continuation_token() {
            Some(t) => token = Some(t.to_string()),
            None => return Ok(restored),
        }
    }
}
