//! A DynamoDB item as the SDK represents it: the one type every module that reads or writes
//! items shares, in a leaf module so that sharing it adds no dependency between them.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// A DynamoDB item: attribute name to value.
pub type Item = HashMap<String, AttributeValue>;
