//! The Lambda client a function invokes itself with (the sweep's shard workers, the worker's
//! drains), and what IAM is asked for each call it makes.

use tickwork::iam::{Access, Input, Resource};

/// A Lambda client from the loaded config (`AWS_ENDPOINT_URL_LAMBDA` honoured, as the SDK does),
/// carrying the suite log of IAM accesses when a test run asks for it ([`tickwork::iam`]).
pub fn lambda_client(sdk: &aws_config::SdkConfig) -> aws_sdk_lambda::Client {
    let mut b = aws_sdk_lambda::config::Builder::from(sdk);
    if let Some(r) = tickwork::iam::suite_recorder() {
        b = b.interceptor(r.map(lambda_accesses));
    }
    aws_sdk_lambda::Client::from_conf(b.build())
}

/// Lambda requests → accesses: `Invoke` is authorised as `lambda:InvokeFunction` on the function
/// (Service Authorization Reference, "Actions defined by AWS Lambda").
pub fn lambda_accesses(input: &Input) -> Option<Vec<Access>> {
    let i = input.downcast_ref::<aws_sdk_lambda::operation::invoke::InvokeInput>()?;
    Some(vec![Access {
        action: "lambda:InvokeFunction".into(),
        resource: Resource::Function { name: i.function_name().unwrap_or_default().to_string() },
        leading_key: None,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_invoke_is_invoke_function_on_its_function() {
        let input =
            aws_sdk_lambda::operation::invoke::InvokeInput::builder().function_name("s-queue-worker").build().unwrap();
        let a = lambda_accesses(&Input::erase(input)).unwrap();
        assert_eq!(a[0].action, "lambda:InvokeFunction");
        assert_eq!(a[0].resource, Resource::Function { name: "s-queue-worker".into() });
    }
}
