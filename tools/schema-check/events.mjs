import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import Ajv from "ajv-draft-04";
import addFormats from "ajv-formats";

// Every file of schemas/, each under its path there ("detail/SumeJobLost.json"):
// the files refer to each other by those paths.
export function loadSchemas(dir) {
  const ajv = new Ajv({ allErrors: true });
  ajv.addVocabulary(["x-amazon-events-source", "x-amazon-events-detail-type"]);
  addFormats(ajv);
  for (const sub of ["", "detail"]) {
    for (const name of readdirSync(join(dir, sub)).filter((n) => n.endsWith(".json"))) {
      const path = sub ? `${sub}/${name}` : name;
      ajv.addSchema(JSON.parse(readFileSync(join(dir, path), "utf8")), path);
    }
  }
  return ajv;
}

const schemaOf = (detailType) => `${detailType.replaceAll(" ", "")}.json`;
// Each problem names its property, "/detail/job_id: must have required property 'job_id'",
// even one that is missing or not allowed (ajv keeps those in params, not in instancePath).
const named = ({ instancePath, params }) => {
  const key = params.missingProperty ?? params.additionalProperty;
  return key === undefined ? instancePath || "/" : `${instancePath}/${key}`;
};
const problems = (validate) => (validate.errors ?? []).map((e) => `${named(e)}: ${e.message}`);

// A whole event, as a rule's target receives it: [] when it is valid.
export function checkEvent(ajv, event) {
  const detailType = event?.["detail-type"];
  const validate = typeof detailType === "string" && ajv.getSchema(schemaOf(detailType));
  if (!validate) return [`/detail-type: no schema for ${JSON.stringify(detailType)}`];
  return validate(event) ? [] : problems(validate);
}

// A detail alone, e.g. a registration's Detail before PutEvents.
export function checkDetail(ajv, detailType, detail) {
  const validate = ajv.getSchema(`detail/${schemaOf(detailType)}`);
  return validate(detail) ? [] : problems(validate);
}
