//! What a handler's error becomes when Lambda reports it: one line naming the root cause.

/// An error and every cause under it, `outer: cause: root`, so the one line Lambda reports names
/// the root (an SDK error's code, a missing table) and not just the wrapper.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let c_s = c.to_string();
        // `#[error(transparent)]` wrappers repeat their cause's text: say it once.
        if !s.ends_with(&c_s) {
            s.push_str(": ");
            s.push_str(&c_s);
        }
        cur = c.source();
    }
    s
}

/// What a handler's error becomes when Lambda reports it: the caller-chosen type and the chain.
pub fn diagnostic(error_type: &str, e: &dyn std::error::Error) -> lambda_runtime::Diagnostic {
    lambda_runtime::Diagnostic { error_type: error_type.to_string(), error_message: error_chain(e) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_chains_name_the_root_cause() {
        #[derive(Debug, thiserror::Error)]
        #[error("sweep failed")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("table `t` does not exist"));
        assert_eq!(error_chain(&e), "sweep failed: table `t` does not exist");
        let d = diagnostic("DynamoDb", &e);
        assert_eq!(
            (d.error_type.as_str(), d.error_message.as_str()),
            ("DynamoDb", "sweep failed: table `t` does not exist")
        );
    }
}
