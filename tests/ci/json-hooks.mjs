// @actions/workflow-parser imports its schema JSON without `with { type: "json" }`, which its
// own builds (bundled) allow and plain Node refuses: this load hook supplies the attribute.
// Node 18 calls it importAssertions, later Node importAttributes.
export async function load(url, context, nextLoad) {
  if (url.endsWith(".json")) {
    const key = "importAttributes" in context ? "importAttributes" : "importAssertions";
    return nextLoad(url, { ...context, [key]: { type: "json" } });
  }
  return nextLoad(url, context);
}
