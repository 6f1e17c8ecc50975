#!/usr/bin/env python3
# Regenerates docs/configuration.md from crates/tickwork/src/env.rs (run from the repository root).
import re
src=open('crates/tickwork/src/env.rs').read()
body=src[src.index('vars! {'):src.index('/// Longest duration any setting accepts')]
entries=re.findall(r'(\w+) = "(TICKWORK_[A-Z0-9_]+)", "([^"]*)", "([^"]*)",\s*"((?:[^"\\]|\\.)*)";', body, re.S)
out=['# Configuration reference','',
'Every environment variable the functions and `tickctl` read. The names are defined once, in',
'`crates/tickwork/src/env.rs`; a test (`tests/it/config_reference.rs`) fails when a variable the',
'code reads is missing here. Every value is validated at start-up: a setting that cannot be correct',
'(a lease not below its schedule, a margin not below the timeout, a page of 0, `1e30` seconds) stops',
'the function before its first tick, with an error naming the variable.','',
'| variable | default | read by | what it sets |','|---|---|---|---|']
for k,name,default,by,doc in entries:
    doc=' '.join(doc.split())
    out.append(f'| `{name}` | {default.replace("|","/") or "—"} | {by} | {doc} |')
out+=['','Lambda sets `AWS_LAMBDA_LOG_LEVEL` and `AWS_LAMBDA_LOG_FORMAT` from the template\'s `LogLevel` and',
'`LogFormat`; the functions log JSON with a `level` and an RFC 3339 `timestamp` when the format is',
'JSON, plain text otherwise. `AWS_REGION` and the `AWS_ENDPOINT_URL_*` variables are the SDK\'s own.','']
open('docs/configuration.md','w').write('\n'.join(out))
print(len(entries))
