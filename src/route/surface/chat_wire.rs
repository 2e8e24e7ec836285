//! The chat request's pieces that more than one surface hands the router
//! (the Messages and Responses surfaces translate into them): a tool, a
//! tool call, `tool_choice` and `response_format`, as types written in the
//! chat API's shapes and key order. The router's request reads them back
//! as JSON (`to_json`), as it reads a Chat Completions request.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

/// The constant `"type": "function"` of a tool, a call and a forced
/// choice.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Function {
    Function,
}

/// An assistant's tool call.
#[derive(Debug, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: Function,
    pub function: Call,
}

#[derive(Debug, Serialize)]
pub struct Call {
    pub name: String,
    pub arguments: String,
}

/// A function tool.
#[derive(Debug, Serialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: Function,
    pub function: Declaration,
}

#[derive(Debug, Serialize)]
pub struct Declaration {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<Value>,
}

/// `tool_choice`: a mode, or one function forced.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ToolChoice {
    Mode(Cow<'static, str>),
    Forced {
        #[serde(rename = "type")]
        kind: Function,
        function: Named,
    },
}

#[derive(Debug, Serialize)]
pub struct Named {
    pub name: String,
}

/// `response_format`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ResponseFormat {
    JsonObject,
    JsonSchema { json_schema: Box<JsonSchema> },
}

#[derive(Debug, Serialize)]
pub struct JsonSchema {
    pub name: Cow<'static, str>,
    pub schema: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
}

/// `x` as JSON. These types have only string keys and numbers that
/// came as JSON: nothing in them can fail to serialize.
pub fn to_json(x: impl Serialize) -> Value {
    serde_json::to_value(x).unwrap_or_default()
}
