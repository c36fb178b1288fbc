// Renders /openapi.json as readable HTML: each operation, its parameters, bodies and responses.
"use strict";

function element(tag, text, children = []) {
  const node = document.createElement(tag);
  if (text) node.textContent = text;
  for (const child of children) node.appendChild(child);
  return node;
}

function describeSchema(schema) {
  const parts = [schema.type || (schema.$ref || "").split("/").pop()];
  if (schema.enum) parts.push("one of " + schema.enum.join(", "));
  if (schema.minimum !== undefined) parts.push(`${schema.minimum} to ${schema.maximum}`);
  if (schema.pattern) parts.push("pattern " + schema.pattern);
  if (schema.default !== undefined) parts.push("default " + JSON.stringify(schema.default));
  return parts.join("; ");
}

function table(headings, rows) {
  const head = element("tr", "", headings.map((h) => element("th", h)));
  return element("table", "", [head, ...rows.map((row) => element("tr", "", row.map((cell) => element("td", cell))))]);
}

async function render() {
  const spec = await (await fetch("/openapi.json")).json();
  const main = document.getElementById("operations");
  main.replaceChildren(element("p", spec.info.description));
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const section = element("section", "", [element("h2", `${method.toUpperCase()} ${path}`), element("p", operation.summary)]);
      if (operation.parameters) {
        section.appendChild(element("h3", "Parameters (query string or form fields)"));
        section.appendChild(table(["name", "schema", "meaning"], operation.parameters.map((p) => [p.name, describeSchema(p.schema), p.description])));
      }
      if (operation.requestBody) {
        section.appendChild(element("h3", "Request body"));
        section.appendChild(element("p", `${operation.requestBody.description} Content types: ${Object.keys(operation.requestBody.content).join(", ")}.`));
      }
      section.appendChild(element("h3", "Responses"));
      section.appendChild(table(["status", "meaning", "content"], Object.entries(operation.responses).map(
        ([status, response]) => [status, response.description, Object.keys(response.content || {}).join(", ")])));
      main.appendChild(section);
    }
  }
  main.appendChild(element("h2", "Error body"));
  main.appendChild(element("pre", '{"error": {"code": "invalid_parameter", "message": "...", "parameter": "zoom"}}'));
}

render();
