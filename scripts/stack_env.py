"""Stack outputs (JSON on stdin, as `sam list stack-outputs --output json` prints them) to a
tickctl environment file. Called by scripts/stack-env.sh."""
import json, sys
stack, path = sys.argv[1], sys.argv[2]
outputs = {o["OutputKey"]: o["OutputValue"] for o in json.load(sys.stdin)}
# Output key -> variable (template.yaml's Outputs; tests/it/template.rs keeps them in step).
names = {
    "TablePrefix": "TICKWORK_TABLE_PREFIX",
    "ArchiveBucketName": "TICKWORK_ARCHIVE_BUCKET",
    "MetricsNamespace": "TICKWORK_METRICS_NAMESPACE",
    "TenantShards": "TICKWORK_TENANT_SHARDS",
    "QueueShards": "TICKWORK_QUEUE_SHARDS",
    "ChangeShards": "TICKWORK_CHANGE_SHARDS",
    "FanoutJob": "TICKWORK_FANOUT_JOB",
    "Region": "AWS_REGION",
    "ControlFailuresQueueUrl": "TICKWORK_CONTROL_FAILURES_URL",
    "Parts": "TICKWORK_STACK_PARTS",
    "Version": "TICKWORK_STACK_VERSION",
}
missing = [k for k in names if k not in outputs]
if missing:
    sys.exit(f"stack {stack} has no output(s) {', '.join(missing)}: deploy the current template.yaml")
with open(path, "w") as f:
    f.write(f"# written by scripts/stack-env.sh from the outputs of stack {stack}\n")
    for k, v in names.items():
        # An output a switched-off part leaves empty (ArchiveBucketName without the archiver) is
        # not written: an empty variable would read as a bucket named "".
        if outputs[k] != "":
            f.write(f"{v}={outputs[k]}\n")
    if "DashboardUrl" in outputs:
        f.write(f"# dashboard: {outputs['DashboardUrl']}\n")
print(f"wrote {path}: tickctl --stack {stack} status")
