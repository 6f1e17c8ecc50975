//! `tickctl cost --control`'s table: the control plane's price per 1,000 operations.

/// `tickctl cost --control`: 1,000 of each control operation, by part.
pub fn print_control(
    as_json: bool,
    ops: &[(tickwork_cost::control::Op, tickwork_cost::control::PerThousand)],
) -> anyhow::Result<()> {
    if as_json {
        let rows: Vec<_> = ops.iter().map(|(op, p)| serde_json::json!({"op": op, "per_thousand": p})).collect();
        return super::json(&rows);
    }
    println!(
        "the control plane: 1,000 operations through the control function (one Lambda request each, {:.0} MB arm64, its time modelled; DynamoDB on demand)",
        tickwork_cost::control::MEMORY_MB
    );
    let mut t = super::table(&[
        "operation",
        "DynamoDB requests",
        "read units",
        "write units",
        "ms (model)",
        "Lambda requests $",
        "Lambda time $",
        "DynamoDB $",
        "per 1,000 $",
    ]);
    for (op, p) in ops {
        t.add_row(vec![
            op.name.to_string(),
            format!("{}", op.requests),
            format!("{}", op.read_units),
            format!("{}", op.write_units),
            format!("{:.0}", tickwork_cost::control::op_ms(op)),
            format!("{:.6}", p.lambda_requests),
            format!("{:.6}", p.lambda_duration),
            format!("{:.6}", p.dynamodb),
            format!("{:.6}", p.total),
        ]);
    }
    println!("{t}");
    Ok(())
}
