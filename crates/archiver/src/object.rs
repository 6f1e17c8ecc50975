//! Archive objects: their keys, their bytes, and the S3 calls that write and check them.
//!
//! ## Layout
//! `<prefix>/<table>/<yyyy>/<mm>/<dd>/shard=<k>/<first ms>-<hash>.ndjson.gz`: the date and the
//! millisecond are those of the batch's first row, the hash (FNV-1a, 16 hex digits) that of its
//! first and last sort keys. The key is deterministic (the same batch always maps to the same
//! object) and bounded in length whatever the change rows' keys hold: a sort key may carry up to
//! 512 bytes of any Unicode, and the whole object key must stay within S3's 1,024 bytes (S3 User
//! Guide, "Naming objects"). User metadata is ASCII only (row count and first/last milliseconds):
//! "you should conform to using US-ASCII characters when using REST" (S3 User Guide, "Working with
//! object metadata").
//!
//! Each line is `{"Item": {...}}` in DynamoDB JSON, the format of DynamoDB's own S3 export, so
//! Athena reads it with the same table definition. Gzip with a fixed mtime: the same rows give the
//! same bytes.

use std::io::Write;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::ChecksumAlgorithm;
use serde_json::Value;
use tickwork::capacity::Item;
use tickwork::changes::to_ddb_json;
use tickwork::shard::fnv1a;

use crate::report::ArchiveError;

/// The object key of a batch: deterministic from the shard and its first and last sort keys.
pub fn object_key(prefix: &str, table: &str, shard: u32, first_tsid: &str, last_tsid: &str) -> String {
    let ms: i64 = first_tsid.get(..13).and_then(|s| s.parse().ok()).unwrap_or(0);
    let date = jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_zoned(jiff::tz::TimeZone::UTC).date())
        .unwrap_or(jiff::civil::date(1970, 1, 1));
    let h = fnv1a(first_tsid.as_bytes()) ^ fnv1a(last_tsid.as_bytes()).rotate_left(29);
    format!(
        "{prefix}/{table}/{:04}/{:02}/{:02}/shard={shard}/{ms:013}-{h:016x}.ndjson.gz",
        date.year(),
        date.month(),
        date.day(),
    )
}

/// Gzip NDJSON of the rows, one `{"Item": ...}` per line; the same rows give the same bytes.
pub fn encode_batch(items: &[Item]) -> Vec<u8> {
    let mut gz = flate2::GzBuilder::new().mtime(0).write(Vec::new(), flate2::Compression::default());
    for item in items {
        let line = serde_json::json!({ "Item": to_ddb_json(item) });
        writeln!(gz, "{line}").expect("writing to memory");
    }
    gz.finish().expect("writing to memory")
}

/// Reads an archived object's rows back (restore, tests).
pub fn decode_batch(bytes: &[u8]) -> Result<Vec<Item>, String> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut text).map_err(|e| format!("not gzip: {e}"))?;
    text.lines()
        .enumerate()
        .map(|(i, l)| {
            let v: Value = serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1))?;
            tickwork::changes::from_ddb_json(&v["Item"]).map_err(|e| format!("line {}: {e}", i + 1))
        })
        .collect()
}

/// An S3 client; path-style addressing when the endpoint is overridden (local servers).
pub fn s3_client(sdk: &aws_config::SdkConfig) -> aws_sdk_s3::Client {
    let local = sdk.endpoint_url().is_some() || std::env::var("AWS_ENDPOINT_URL_S3").is_ok();
    let mut b = aws_sdk_s3::config::Builder::from(sdk).force_path_style(local);
    // The suite log of IAM accesses (`tickwork::iam`), when a test run asks for it.
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r.map(s3_accesses));
    }
    aws_sdk_s3::Client::from_conf(b.build())
}

/// Writes `items` to `key` with a SHA-256 checksum the SDK sends and S3 verifies.
pub async fn put_batch(s3: &aws_sdk_s3::Client, bucket: &str, key: &str, items: &[Item]) -> Result<(), ArchiveError> {
    let ms = |i: Option<&Item>| {
        i.and_then(|i| tickwork::schema::get_s(i, tickwork::changes::TSID))
            .and_then(|t| t.get(..13))
            .unwrap_or("0")
            .to_string()
    };
    s3.put_object()
        .bucket(bucket)
        .key(key)
        .body(ByteStream::from(encode_batch(items)))
        .content_type("application/x-ndjson")
        .content_encoding("gzip")
        .checksum_algorithm(ChecksumAlgorithm::Sha256)
        .metadata("rows", items.len().to_string())
        .metadata("first-ms", ms(items.first()))
        .metadata("last-ms", ms(items.last()))
        .send()
        .await
        .map_err(|e| ArchiveError::S3 {
            bucket: bucket.to_string(),
            key: key.to_string(),
            reason: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        })?;
    Ok(())
}

/// Does `key` exist? (HeadObject; S3 is strongly consistent for reads after writes, so "no" means
/// the put never happened.) Authorised as `s3:GetObject`.
pub async fn exists(s3: &aws_sdk_s3::Client, bucket: &str, key: &str) -> Result<bool, ArchiveError> {
    match s3.head_object().bucket(bucket).key(key).send().await {
        Ok(_) => Ok(true),
        Err(e) if e.as_service_error().is_some_and(|s| s.is_not_found()) => Ok(false),
        Err(e) => Err(ArchiveError::S3 {
            bucket: bucket.to_string(),
            key: key.to_string(),
            reason: aws_sdk_s3::error::DisplayErrorContext(&e).to_string(),
        }),
    }
}

/// S3 requests → the accesses IAM evaluates ([`tickwork::iam::Recorder::map`]): HeadObject is
/// authorised as `s3:GetObject` ("To use HEAD, you must have READ access to the object", S3 API
/// reference, HeadObject), listing as `s3:ListBucket` on the bucket.
pub fn s3_accesses(input: &tickwork::iam::Input) -> Option<Vec<tickwork::iam::Access>> {
    use aws_sdk_s3::operation as op;
    use tickwork::iam::{Access, Resource};
    let object = |action: &str, bucket: Option<&str>, key: Option<&str>| Access {
        action: action.to_string(),
        resource: Resource::Object {
            bucket: bucket.unwrap_or_default().to_string(),
            key: key.unwrap_or_default().to_string(),
        },
        leading_key: None,
    };
    if let Some(i) = input.downcast_ref::<op::put_object::PutObjectInput>() {
        return Some(vec![object("s3:PutObject", i.bucket(), i.key())]);
    }
    if let Some(i) = input.downcast_ref::<op::head_object::HeadObjectInput>() {
        return Some(vec![object("s3:GetObject", i.bucket(), i.key())]);
    }
    if let Some(i) = input.downcast_ref::<op::get_object::GetObjectInput>() {
        return Some(vec![object("s3:GetObject", i.bucket(), i.key())]);
    }
    if let Some(i) = input.downcast_ref::<op::list_objects_v2::ListObjectsV2Input>() {
        return Some(vec![Access {
            action: "s3:ListBucket".into(),
            resource: Resource::Bucket { bucket: i.bucket().unwrap_or_default().to_string() },
            leading_key: None,
        }]);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;

    #[test]
    fn keys_are_deterministic_dated_and_bounded() {
        let k = object_key("archive", "tw-changes", 3, "1764374400000#order#1", "1764374999999#order#9");
        assert!(k.starts_with("archive/tw-changes/2025/11/29/shard=3/1764374400000-"), "{k}");
        assert_eq!(k, object_key("archive", "tw-changes", 3, "1764374400000#order#1", "1764374999999#order#9"));
        assert_ne!(k, object_key("archive", "tw-changes", 3, "1764374400000#order#1", "1764374999999#order#8"));
        // A 512-byte non-ASCII row key cannot lengthen the key or put non-ASCII in it.
        let long = format!("1764374400000#{}", "ü".repeat(256));
        let k = object_key("archive", "tw-changes", 3, &long, &long);
        assert!(k.len() < 100 && k.is_ascii(), "{k}");
    }

    #[test]
    fn batches_encode_deterministically_and_round_trip() {
        let items: Vec<Item> = (0..3)
            .map(|i| {
                Item::from([
                    ("pk".into(), AttributeValue::S(format!("e#{i}"))),
                    ("n".into(), AttributeValue::N(i.to_string())),
                ])
            })
            .collect();
        let a = encode_batch(&items);
        assert_eq!(a, encode_batch(&items), "same rows, same bytes");
        assert_eq!(decode_batch(&a).unwrap(), items);
        assert!(decode_batch(b"not gzip").is_err());
    }
}
