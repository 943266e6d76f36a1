//! TypeScript declarations from the JSON Schemas of the report and the rule format.
//!
//! The schemas come from the Rust types (schemars), so the declarations the WASM package
//! ships follow the types without a second description of them. The converter knows the
//! shapes schemars writes: objects with `properties`/`required`, `$ref`s into `$defs`,
//! `["T", "null"]` and `anyOf [T, null]` for options, `enum`/`oneOf` of string constants
//! for enums, `additionalProperties` for maps.

use serde_json::Value;

/// One `.d.ts` declaring every type of the given schemas (root types by their title).
pub fn declarations(schemas: &[&Value]) -> String {
    let mut out =
        String::from("// Generated from rules/schema/*.schema.json by `torchdx rules schema`; do not edit.\n");
    let mut done: Vec<String> = Vec::new();
    for schema in schemas {
        let root = schema["title"].as_str().unwrap_or("Root").to_string();
        let mut defs: Vec<(String, &Value)> = vec![(root, *schema)];
        if let Some(d) = schema["$defs"].as_object() {
            defs.extend(d.iter().map(|(k, v)| (k.clone(), v)));
        }
        for (name, def) in defs {
            if done.contains(&name) {
                continue;
            }
            out.push('\n');
            out.push_str(&declaration(&name, def));
            done.push(name);
        }
    }
    out
}

fn doc(v: &Value, indent: &str) -> String {
    match v["description"].as_str() {
        Some(d) => {
            let lines: Vec<String> = d.lines().map(|l| format!("{indent} * {}", l.trim_end())).collect();
            format!("{indent}/**\n{}\n{indent} */\n", lines.join("\n"))
        }
        None => String::new(),
    }
}

fn declaration(name: &str, def: &Value) -> String {
    let head = doc(def, "");
    if def["type"] == "object" && def.get("properties").is_some() {
        format!("{head}export interface {name} {}\n", object_body(def, ""))
    } else {
        format!("{head}export type {name} = {};\n", ty(def, ""))
    }
}

fn object_body(def: &Value, indent: &str) -> String {
    let required: Vec<&str> =
        def["required"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let inner = format!("{indent}  ");
    let mut s = String::from("{\n");
    if let Some(props) = def["properties"].as_object() {
        for (k, v) in props {
            // serde writes an `Option` field as `null` rather than leaving it out (the
            // schema lists it as not required): a nullable field is always present.
            let nullable = v["type"].as_array().is_some_and(|t| t.iter().any(|x| x == "null"))
                || v["anyOf"].as_array().is_some_and(|a| a.iter().any(|x| x["type"] == "null"));
            let opt = if required.contains(&k.as_str()) || nullable { "" } else { "?" };
            s.push_str(&doc(v, &inner));
            s.push_str(&format!("{inner}{k}{opt}: {};\n", ty(v, &inner)));
        }
    }
    match &def["additionalProperties"] {
        Value::Bool(true) => s.push_str(&format!("{inner}[key: string]: unknown;\n")),
        v @ Value::Object(_) => s.push_str(&format!("{inner}[key: string]: {};\n", ty(v, &inner))),
        _ => {}
    }
    s.push_str(indent);
    s.push('}');
    s
}

fn ty(v: &Value, indent: &str) -> String {
    if let Some(r) = v["$ref"].as_str() {
        return r.rsplit('/').next().unwrap_or("unknown").to_string();
    }
    if let Some(c) = v.get("const") {
        return c.to_string();
    }
    if let Some(e) = v["enum"].as_array() {
        return e.iter().map(Value::to_string).collect::<Vec<_>>().join(" | ");
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = v[key].as_array() {
            return alts.iter().map(|a| ty(a, indent)).collect::<Vec<_>>().join(" | ");
        }
    }
    match &v["type"] {
        Value::Array(types) => types
            .iter()
            .map(|t| {
                let mut one = v.clone();
                one["type"] = t.clone();
                ty(&one, indent)
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Value::String(t) => match t.as_str() {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let item = ty(&v["items"], indent);
                if item.contains(' ') {
                    format!("({item})[]")
                } else {
                    format!("{item}[]")
                }
            }
            "object" if v.get("properties").is_some() => object_body(v, indent),
            "object" => match &v["additionalProperties"] {
                Value::Object(_) => format!("{{ [key: string]: {} }}", ty(&v["additionalProperties"], indent)),
                _ => "{ [key: string]: unknown }".into(),
            },
            _ => "unknown".into(),
        },
        _ => "unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_schemars_writes() {
        let schema = serde_json::json!({
            "title": "Report",
            "type": "object",
            "properties": {
                "initiating": { "type": ["integer", "null"], "description": "Index." },
                "findings": { "type": "array", "items": { "$ref": "#/$defs/Finding" } },
                "timeline": { "type": "array", "items": { "type": "string" } }
            },
            "required": ["initiating", "findings"],
            "$defs": {
                "Finding": { "type": "object", "properties": { "role": { "$ref": "#/$defs/Role" } }, "required": ["role"] },
                "Role": { "type": "string", "enum": ["initiating", "collateral"] },
                "Evidence": { "type": "object", "properties": { "op": { "type": "string" } }, "additionalProperties": true }
            }
        });
        let d = declarations(&[&schema]);
        for want in [
            "export interface Report {",
            "  initiating: number | null;",
            "  findings: Finding[];",
            "  timeline?: string[];",
            "export type Role = \"initiating\" | \"collateral\";",
            "  role: Role;",
            "  op?: string;\n  [key: string]: unknown;",
            "   * Index.",
        ] {
            assert!(d.contains(want), "{want}\n{d}");
        }
    }
}
