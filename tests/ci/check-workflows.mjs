// check-workflows.mjs: checks the CI files that doc/ci.md offers to copy (doc/ci/*.yml).
//   node check-workflows.mjs            every check below; exit 1 naming each failure
//   node check-workflows.mjs --step FILE JOB STEP_ID
//                                       prints that GitHub step's shell and run: script, for
//                                       run-github-step.sh to run it as the runner would
// Checks:
//   github-*.yml  parsed by GitHub's own parser (@actions/workflow-parser, as the Actions
//                 service and its VS Code extension use it) and converted to a workflow
//                 template: any error fails; every steps.<id> an expression names is an
//                 earlier step of the same job
//   gitlab-*.yml  gitlab-ci-local --preview: GitLab's CI JSON schema (the copy gitlab-ci-local
//                 ships, with ajv) and its own checks (needs: names a job, stage: a stage);
//                 a line "# key: ..." that the file says to uncomment is checked uncommented too
//   all           every scripts/... path they run exists; doc/ci.md names every file, and
//                 each of its yaml blocks is a run of consecutive lines of one of them
// The packages are pinned in package.json / package-lock.json (npm ci, scripts/install-deps.sh).
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { register } from "node:module";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const ciDir = path.join(root, "doc/ci");

if (!fs.existsSync(path.join(here, "node_modules/@actions/workflow-parser"))) {
  console.error(`check-workflows: ${path.join(here, "node_modules")} lacks the checkers: run scripts/install-deps.sh ` +
    `(npm ci in tests/ci)`);
  process.exit(1);
}
register("./json-hooks.mjs", import.meta.url);
const { parseWorkflow, convertWorkflowTemplate, NoOperationTraceWriter } = await import("@actions/workflow-parser");
const YAML = await import("yaml");

const failures = [];
const fail = (file, message) => failures.push(`${path.relative(root, file)}: ${message}`);

async function checkGithub(file) {
  const content = fs.readFileSync(file, "utf8");
  const parsed = parseWorkflow({ name: path.basename(file), content }, new NoOperationTraceWriter());
  const errors = parsed.context.errors.getErrors().map((e) => e.message);
  if (errors.length === 0 && parsed.value) {
    const template = await convertWorkflowTemplate(parsed.context, parsed.value);
    errors.push(...(template.errors ?? []).map((e) => e.Message ?? e.message));
  }
  if (!parsed.value) errors.push("the parser returned no workflow");
  for (const message of new Set(errors)) fail(file, message);
  if (errors.length > 0) return;

  // The parser takes steps.<id> in an expression as it comes; a renamed step would leave an
  // output that is always empty (the install step's package path, the report's condition).
  const workflow = YAML.parse(content);
  for (const [jobName, job] of Object.entries(workflow.jobs ?? {})) {
    const seen = new Set();
    for (const step of job.steps ?? []) {
      const text = JSON.stringify(step);
      for (const [, id] of text.matchAll(/steps\.([A-Za-z_][\w-]*)\./g)) {
        if (!seen.has(id)) fail(file, `job ${jobName}, step '${step.name ?? step.uses}': steps.${id} is no earlier step`);
      }
      if (step.id) seen.add(step.id);
    }
  }
}

function gitlabCiLocal(file, content, label) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rdmakit-gitlab-"));
  try {
    fs.writeFileSync(path.join(dir, ".gitlab-ci.yml"), content);
    // gitlab-ci-local reads the checkout's git data (and falls back without a remote).
    execFileSync("git", ["init", "-q", dir]);
    execFileSync(process.execPath, [path.join(here, "node_modules/gitlab-ci-local/src/index.js"), "--preview"], {
      cwd: dir,
      env: { ...process.env, HOME: dir, NO_COLOR: "1", FORCE_COLOR: "0" },
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 120000,
    });
  } catch (error) {
    const output = `${error.stdout ?? ""}${error.stderr ?? ""}`
      .split("For further troubleshooting")[0]
      .split("\n")
      .filter((line) => !/git |fatal:|fallback|^Use '--'|^HEAD$|^\s+Command failed|remote/.test(line))
      .join("\n")
      .trim();
    fail(file, `gitlab-ci-local --preview${label} failed (exit ${error.status}):\n${output || error.message}`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function checkGitlab(file) {
  const content = fs.readFileSync(file, "utf8");
  gitlabCiLocal(file, content, "");
  // "# key: value" right after a comment line that ends in "uncomment:" is a documented
  // variant: check the file with it in force as well.
  const lines = content.split("\n");
  const variant = lines.map((line, i) =>
    i > 0 && /uncomment:$/.test(lines[i - 1].trim()) ? line.replace(/^(\s*)# /, "$1") : line);
  if (variant.join("\n") !== content) gitlabCiLocal(file, variant.join("\n"), " with the commented variant in force");
}

function checkScripts(file) {
  const content = fs.readFileSync(file, "utf8");
  for (const [script] of content.matchAll(/\bscripts\/[\w.-]+/g)) {
    if (!fs.existsSync(path.join(root, script))) fail(file, `runs ${script}, which the checkout lacks`);
  }
}

// doc/ci.md's yaml blocks are excerpts: each must be consecutive lines of one file.
function checkDoc(files) {
  const docPath = path.join(root, "doc/ci.md");
  const doc = fs.readFileSync(docPath, "utf8");
  for (const file of files) {
    const name = path.relative(root, file);
    if (!doc.includes(name)) fail(docPath, `does not name ${name}`);
  }
  const contents = files.map((file) => fs.readFileSync(file, "utf8").split("\n"));
  const isRunOf = (block, lines) =>
    lines.some((_, start) => block.every((line, i) => lines[start + i] === line));
  for (const [, body] of doc.matchAll(/^```yaml\n([\s\S]*?)^```$/gm)) {
    const block = body.replace(/\n$/, "").split("\n");
    if (!contents.some((lines) => isRunOf(block, lines))) {
      fail(docPath, `this yaml block is not an excerpt of any doc/ci file:\n${block.slice(0, 3).join("\n")}\n...`);
    }
  }
}

function printStep(file, jobName, stepId) {
  const workflow = YAML.parse(fs.readFileSync(file, "utf8"));
  const step = (workflow.jobs?.[jobName]?.steps ?? []).find((s) => s.id === stepId);
  if (!step?.run) {
    console.error(`check-workflows: ${file} has no job ${jobName} with a run: step of id ${stepId}`);
    process.exit(2);
  }
  const shell = step.shell ?? workflow.jobs[jobName].defaults?.run?.shell ?? workflow.defaults?.run?.shell ?? "";
  const env = { ...(workflow.env ?? {}), ...(workflow.jobs[jobName].env ?? {}), ...(step.env ?? {}) };
  process.stdout.write(JSON.stringify({ shell, env, run: step.run }) + "\n");
}

if (process.argv[2] === "--step") {
  printStep(process.argv[3], process.argv[4], process.argv[5]);
  process.exit(0);
}

const files = fs
  .readdirSync(ciDir)
  .filter((name) => name.endsWith(".yml"))
  .sort()
  .map((name) => path.join(ciDir, name));
const github = files.filter((file) => path.basename(file).startsWith("github-"));
const gitlab = files.filter((file) => path.basename(file).startsWith("gitlab-"));
for (const file of files) {
  if (!github.includes(file) && !gitlab.includes(file)) fail(file, "named neither github-*.yml nor gitlab-*.yml");
  checkScripts(file);
}
for (const file of github) await checkGithub(file);
for (const file of gitlab) checkGitlab(file);
checkDoc(files);

if (failures.length > 0) {
  for (const failure of failures) console.error(`FAIL ${failure}`);
  process.exit(1);
}
console.log(`check-workflows: ok: ${github.length} GitHub workflows (@actions/workflow-parser), ` +
  `${gitlab.length} GitLab CI files (gitlab-ci-local), doc/ci.md's excerpts`);
