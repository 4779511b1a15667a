//! Tools the agents call: the [`Tool`] trait, typed tools whose schema comes from schemars,
//! and the [`ToolRegistry`] that dispatches calls and explains mistakes to the model.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ToolError;
use crate::incident::Evidence;
use crate::time::Timestamp;

/// What a model is told about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// What a tool call may know about the run it is part of.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolContext {
    /// The incident under investigation, when there is one.
    pub incident_id: Option<String>,
    /// No data from at or after this instant may be returned (the detection time).
    pub cutoff: Option<Timestamp>,
    /// The step of the run that makes the call (0-based).
    pub step: usize,
}

impl ToolContext {
    /// A context with a detection-time cutoff.
    pub fn with_cutoff(mut self, cutoff: Timestamp) -> Self {
        self.cutoff = Some(cutoff);
        self
    }

    /// A context for an incident.
    pub fn with_incident(mut self, id: impl Into<String>) -> Self {
        self.incident_id = Some(id.into());
        self
    }

    /// A context at a given step.
    pub fn at_step(mut self, step: usize) -> Self {
        self.step = step;
        self
    }
}

/// What a tool returns: text for the model, optional structured data, and any evidence found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// Structured data for programs (reports, evaluation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
    /// Evidence the tool established.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<Evidence>,
}

impl ToolOutput {
    /// An output with only text.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutput {
            text: text.into(),
            ..Default::default()
        }
    }
}

/// A tool a model can call.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::tool::{Tool, ToolContext, ToolOutput};
/// use rca_core::ToolError;
///
/// struct Clock;
///
/// #[async_trait]
/// impl Tool for Clock {
///     fn name(&self) -> &str { "clock" }
///     fn description(&self) -> &str { "Returns the detection time of the incident." }
///     fn parameters(&self) -> serde_json::Value { serde_json::json!({"type": "object"}) }
///     async fn call(&self, _args: serde_json::Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(format!("{:?}", ctx.cutoff)))
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the model calls it by.
    fn name(&self) -> &str;
    /// What it does and when to use it.
    fn description(&self) -> &str;
    /// JSON schema of the arguments object.
    fn parameters(&self) -> serde_json::Value;
    /// `true` when calling it twice with the same arguments gives the same answer, so a repeat
    /// is wasted (the controller's error rules use this).
    fn is_stateless(&self) -> bool {
        true
    }
    /// The spec shown to the model.
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: self.description().to_string(),
            parameters: self.parameters(),
        }
    }
    /// Runs the tool.
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError>;
}

fn _object_safe(_: &dyn Tool) {}

/// A tool with typed arguments. Wrap it in [`Typed`] (or call
/// [`ToolRegistry::register_typed`]) to get a [`Tool`] whose schema comes from schemars and
/// whose bad arguments go back to the model with that schema.
///
/// ```
/// use async_trait::async_trait;
/// use rca_core::tool::{ToolContext, ToolOutput, ToolRegistry, TypedTool};
/// use rca_core::ToolError;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct EchoArgs { text: String }
///
/// struct Echo;
///
/// #[async_trait]
/// impl TypedTool for Echo {
///     type Args = EchoArgs;
///     fn name(&self) -> &str { "echo" }
///     fn description(&self) -> &str { "Repeats its input." }
///     async fn run(&self, args: EchoArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
///         Ok(ToolOutput::text(args.text))
///     }
/// }
///
/// let mut registry = ToolRegistry::new();
/// registry.register_typed(Echo).unwrap();
/// let out = futures::executor::block_on(
///     registry.dispatch("echo", serde_json::json!({"text": "hi"}), &ToolContext::default()),
/// ).unwrap();
/// assert_eq!(out.text, "hi");
/// ```
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments object.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The name the model calls it by (a method, so one type can serve several tools).
    fn name(&self) -> &str;
    /// What it does and when to use it.
    fn description(&self) -> &str;
    /// See [`Tool::is_stateless`].
    fn is_stateless(&self) -> bool {
        true
    }
    /// Runs the tool on parsed arguments.
    async fn run(&self, args: Self::Args, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// Adapts a [`TypedTool`] to [`Tool`]: generates the schema once and turns argument parse
/// failures into [`ToolError::InvalidArgs`] carrying the schema.
pub struct Typed<T: TypedTool> {
    inner: T,
    schema: serde_json::Value,
}

impl<T: TypedTool> Typed<T> {
    /// Wraps a typed tool.
    pub fn new(inner: T) -> Self {
        let schema = serde_json::Value::from(schemars::schema_for!(T::Args));
        Typed { inner, schema }
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.inner
    }
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> serde_json::Value {
        self.schema.clone()
    }
    fn is_stateless(&self) -> bool {
        self.inner.is_stateless()
    }
    async fn call(
        &self,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        // A model that sends no arguments for a tool without required fields means `{}`.
        let args = if args.is_null() {
            serde_json::Value::Object(Default::default())
        } else {
            args
        };
        let parsed: T::Args = serde_json::from_value(args).map_err(|e| ToolError::InvalidArgs {
            tool: self.inner.name().to_string(),
            message: e.to_string(),
            schema: self.schema.to_string(),
        })?;
        self.inner.run(parsed, ctx).await
    }
}

/// The tools available to an agent, in registration order.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Vec<Arc<dyn Tool>>,
    by_name: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a second tool of the same name is refused.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), ToolError> {
        let name = tool.name().to_string();
        if self.by_name.contains_key(&name) {
            return Err(ToolError::Refused {
                reason: format!("a tool named `{name}` is already registered"),
            });
        }
        self.by_name.insert(name, self.tools.len());
        self.tools.push(tool);
        Ok(())
    }

    /// Adds a typed tool.
    pub fn register_typed<T: TypedTool>(&mut self, tool: T) -> Result<(), ToolError> {
        self.register(Arc::new(Typed::new(tool)))
    }

    /// The tool of that name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.by_name.get(name).and_then(|&i| self.tools.get(i))
    }

    /// Names in registration order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name().to_string()).collect()
    }

    /// Specs in registration order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|t| t.spec()).collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// A registry holding only the named tools (unknown names are skipped), in this
    /// registry's order. Used to show each state of an agent only its own tools.
    pub fn subset(&self, names: &[&str]) -> ToolRegistry {
        let mut out = ToolRegistry::new();
        for tool in &self.tools {
            if names.contains(&tool.name()) {
                // Names are unique here, so registration cannot fail.
                let _ = out.register(Arc::clone(tool));
            }
        }
        out
    }

    /// Calls the named tool. An unknown name gives [`ToolError::NotFound`] listing the tools.
    pub async fn dispatch(
        &self,
        name: &str,
        args: serde_json::Value,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let tool = self.get(name).ok_or_else(|| ToolError::NotFound {
            name: name.to_string(),
            available: self.names(),
        })?;
        let span = tracing::debug_span!("tool", name = %name, step = ctx.step);
        let _guard = span.enter();
        tool.call(args, ctx).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize, JsonSchema)]
    struct AddArgs {
        a: i64,
        b: i64,
    }

    struct Add;

    #[async_trait]
    impl TypedTool for Add {
        type Args = AddArgs;
        fn name(&self) -> &str {
            "add"
        }
        fn description(&self) -> &str {
            "Adds two integers."
        }
        async fn run(&self, args: AddArgs, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text((args.a + args.b).to_string()))
        }
    }

    fn registry() -> ToolRegistry {
        let mut r = ToolRegistry::new();
        r.register_typed(Add).unwrap();
        r
    }

    #[tokio::test]
    async fn dispatches_typed_tool() {
        let out = registry()
            .dispatch(
                "add",
                serde_json::json!({"a": 2, "b": 3}),
                &ToolContext::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.text, "5");
    }

    #[tokio::test]
    async fn bad_args_show_schema() {
        let err = registry()
            .dispatch(
                "add",
                serde_json::json!({"a": "two"}),
                &ToolContext::default(),
            )
            .await
            .unwrap_err();
        match &err {
            ToolError::InvalidArgs { tool, schema, .. } => {
                assert_eq!(tool, "add");
                assert!(schema.contains("\"a\"") && schema.contains("\"b\""));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("schema"));
    }

    #[tokio::test]
    async fn unknown_tool_lists_tools() {
        let err = registry()
            .dispatch("mul", serde_json::json!({}), &ToolContext::default())
            .await
            .unwrap_err();
        assert_eq!(
            err,
            ToolError::NotFound {
                name: "mul".into(),
                available: vec!["add".into()]
            }
        );
        assert!(err.to_string().contains("add"));
    }

    #[test]
    fn duplicate_names_refused_and_subset_keeps_order() {
        let mut r = registry();
        assert!(matches!(
            r.register_typed(Add),
            Err(ToolError::Refused { .. })
        ));
        assert_eq!(r.subset(&["add", "nope"]).names(), vec!["add"]);
        assert!(r.subset(&["nope"]).is_empty());
        let spec = &r.specs()[0];
        assert_eq!(spec.parameters["type"], "object");
    }
}
