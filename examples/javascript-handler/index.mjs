// A tickwork target in JavaScript (Node.js): the units of a batch, in the shape of an SQS event.
//
// Each record's `messageId` is the unit's idempotency key and its `body` the unit:
// `{"key", "kind", "tenant", "attempt", "payload"}`. A unit can arrive more than once (a batch
// retried after a failure, a worker that died after the call), so the effect is written once per
// key: a conditional put that fails when the key is already there. Units this function cannot
// handle now are listed in `batchItemFailures`: tickwork retries those alone (then dead-letters
// them after the queue's attempts) and counts the rest done. Throwing fails the whole batch:
// every unit in it is retried.
//
// Three switches show the failure paths (docs/targets.md): EXAMPLE_FAIL_TENANTS lists tenants
// whose units are always reported failed, EXAMPLE_RAISE_TENANTS tenants whose units throw on their
// first attempt, EXAMPLE_POISON_TENANTS tenants whose units always throw.
import { DynamoDBClient, PutItemCommand, ConditionalCheckFailedException } from "@aws-sdk/client-dynamodb";

const TABLE = process.env.EFFECTS_TABLE;
const list = (v) => new Set((v ?? "").split(",").filter(Boolean));
const FAIL = list(process.env.EXAMPLE_FAIL_TENANTS);
const RAISE = list(process.env.EXAMPLE_RAISE_TENANTS);
const POISON = list(process.env.EXAMPLE_POISON_TENANTS);
const dynamodb = new DynamoDBClient({});

export const handler = async (event) => {
  const units = event.Records.map((r) => JSON.parse(r.body));
  for (const unit of units) {
    if (POISON.has(unit.tenant)) {
      throw new Error(`tenant ${unit.tenant}'s unit cannot be handled`);
    }
    if (RAISE.has(unit.tenant) && unit.attempt === 1) {
      throw new Error(`tenant ${unit.tenant} is not ready yet`);
    }
  }
  const batchItemFailures = [];
  for (const [i, record] of event.Records.entries()) {
    const unit = units[i];
    if (FAIL.has(unit.tenant)) {
      batchItemFailures.push({ itemIdentifier: record.messageId });
      continue;
    }
    try {
      await dynamodb.send(new PutItemCommand({
        TableName: TABLE,
        Item: {
          pk: { S: unit.key },
          // A unit of no tenant (a job of the whole stack) has `tenant: null`.
          tenant: { S: unit.tenant ?? "" },
          kind: { S: unit.kind },
          runtime: { S: "nodejs" },
          at: { N: String(Date.now()) },
        },
        // The effect happens once per key, however often the unit is delivered.
        ConditionExpression: "attribute_not_exists(pk)",
      }));
    } catch (e) {
      if (!(e instanceof ConditionalCheckFailedException)) {
        batchItemFailures.push({ itemIdentifier: record.messageId });
        continue;
      }
      console.log(JSON.stringify({ level: "INFO", message: "already handled", key: unit.key }));
    }
  }
  return { batchItemFailures };
};
