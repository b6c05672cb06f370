// node tools/schema-check/validate.mjs [--detail "Sume Job Submitted"] FILE...
//
// Checks JSON files against schemas/ with the ajv code of docs/integrating.md
// (events.mjs, the same text): each file a whole event, found by its detail-type,
// or with --detail the detail of that detail-type alone. Prints "FILE: ok" or
// one line per problem, naming the property; exit status 0 when every file is
// valid, 1 when one is not, 2 for bad arguments or a file that is not JSON.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { checkDetail, checkEvent, loadSchemas } from "./events.mjs";

const USAGE = 'usage: node tools/schema-check/validate.mjs [--detail "Sume Job Submitted"] FILE...';

function main() {
  let parsed;
  try {
    parsed = parseArgs({ options: { detail: { type: "string" } }, allowPositionals: true });
  } catch (error) {
    console.error(`${error.message}\n${USAGE}`);
    return 2;
  }
  const { values, positionals: files } = parsed;
  if (files.length === 0) {
    console.error(USAGE);
    return 2;
  }
  const ajv = loadSchemas(join(dirname(fileURLToPath(import.meta.url)), "..", "..", "schemas"));
  if (values.detail !== undefined && !ajv.getSchema(`detail/${values.detail.replaceAll(" ", "")}.json`)) {
    console.error(`no schema for detail-type ${values.detail}\n${USAGE}`);
    return 2;
  }
  let status = 0;
  for (const file of files) {
    let value;
    try {
      value = JSON.parse(readFileSync(file, "utf8"));
    } catch (error) {
      console.error(`${file}: not a JSON file: ${error.message}`);
      return 2;
    }
    const found =
      values.detail === undefined ? checkEvent(ajv, value) : checkDetail(ajv, values.detail, value);
    for (const problem of found.length ? found : ["ok"]) console.log(`${file}: ${problem}`);
    if (found.length) status = 1;
  }
  return status;
}

process.exitCode = main();
