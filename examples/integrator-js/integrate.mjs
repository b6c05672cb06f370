// An application's whole side of sume-webhooks, with the AWS SDK for JavaScript v3:
// subscribe with its own rule and queue, register a job it submitted to Sume, read
// the job's announcement. The same code runs against a deployed stage and the local
// stack: the SDK takes the endpoint, credentials and region from the usual AWS_*
// variables (AWS_ENDPOINT_URL for the local stack), the bus name from SUME_EVENT_BUS.
//
//   node integrate.mjs --job-id JOB --status-url URL [--metadata JSON] [--name NAME]
//                      [--wait-seconds N] [--long-poll-seconds N] [--keep]
//
// Prints the announcement (the EventBridge event) as one JSON line on stdout, what
// it does on stderr. Exit status: 0 announced, 1 nothing announced in time (or an
// AWS call refused), 2 usage. --name names the rule and the queue; by default each
// run has its own (integrator-js-<random>), so runs at the same time never share
// one, and the first to clean up never deletes another's subscription.
// --long-poll-seconds (1-20, default 20) is how long one receive waits on an empty
// queue: an announcement ends the wait at once either way; a shorter one notices
// sooner that the queue was deleted under it, for a receive call every N seconds.

import { randomUUID } from "node:crypto";
import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import {
  DeleteRuleCommand,
  EventBridgeClient,
  PutEventsCommand,
  PutRuleCommand,
  PutTargetsCommand,
  RemoveTargetsCommand,
} from "@aws-sdk/client-eventbridge";
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SetQueueAttributesCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";

export const ANNOUNCEMENT_SOURCE = "sume.webhooks";
export const REGISTRATION_DETAIL_TYPE = "Sume Job Submitted";
const APPLICATION_SOURCE = "com.example.integrator-js";
// SQS's own ceiling for one long poll.
const MAX_LONG_POLL_SECONDS = 20;

// A subscription is a rule on the bus and a queue only that rule may send to. An
// application owns its own: a queue shared with another reader loses to it every
// message the other receives first.
export async function subscribe({ events, sqs, bus, name }) {
  const { QueueUrl: queueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: name }));
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ["QueueArn"] }),
  );
  const queueArn = Attributes.QueueArn;
  const { RuleArn: ruleArn } = await events.send(
    new PutRuleCommand({
      Name: name,
      EventBusName: bus,
      EventPattern: JSON.stringify({ source: [ANNOUNCEMENT_SOURCE] }),
    }),
  );
  const policy = {
    Version: "2012-10-17",
    Statement: [
      {
        Effect: "Allow",
        Principal: { Service: "events.amazonaws.com" },
        Action: "sqs:SendMessage",
        Resource: queueArn,
        Condition: { ArnEquals: { "aws:SourceArn": ruleArn } },
      },
    ],
  };
  // Only now: the policy names the rule, which names the queue.
  await sqs.send(
    new SetQueueAttributesCommand({
      QueueUrl: queueUrl,
      Attributes: { Policy: JSON.stringify(policy) },
    }),
  );
  const targets = await events.send(
    new PutTargetsCommand({
      Rule: name,
      EventBusName: bus,
      Targets: [{ Id: "queue", Arn: queueArn }],
    }),
  );
  if (targets.FailedEntryCount) {
    throw new Error(`the rule's target was refused: ${JSON.stringify(targets.FailedEntries)}`);
  }
  return { queueUrl, ruleArn };
}

export async function unsubscribe({ events, sqs, bus, name, queueUrl }) {
  await events.send(new RemoveTargetsCommand({ Rule: name, EventBusName: bus, Ids: ["queue"] }));
  await events.send(new DeleteRuleCommand({ Name: name, EventBusName: bus }));
  await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl }));
}

// One PutEvents entry. Detail is a JSON string; JSON.stringify turns numbers into
// doubles, so a value that needs more than 15-17 digits goes as a string.
export async function register({ events, bus, jobId, statusUrl, metadata }) {
  const detail = { job_id: jobId, status_url: statusUrl };
  if (metadata !== undefined) detail.metadata = metadata;
  const answer = await events.send(
    new PutEventsCommand({
      Entries: [
        {
          EventBusName: bus,
          Source: APPLICATION_SOURCE,
          DetailType: REGISTRATION_DETAIL_TYPE,
          Detail: JSON.stringify(detail),
        },
      ],
    }),
  );
  // PutEvents answers 200 even when it refused the entry.
  if (answer.FailedEntryCount) {
    const [entry] = answer.Entries;
    throw new Error(`registration not put: ${entry.ErrorCode}: ${entry.ErrorMessage}`);
  }
  return answer.Entries[0].EventId;
}

function announcementOf(body) {
  try {
    const event = JSON.parse(body);
    const ok = event && event.source === ANNOUNCEMENT_SOURCE && typeof event.detail === "object";
    return ok ? event : null;
  } catch {
    return null;
  }
}

// The first announcement about jobId to arrive before the deadline (a Date), or
// null: how the job ended, or that its registration was refused. Every message read
// is deleted: the queue is this application's own, and in a real one the other
// jobs' announcements would be handled here, deduped on (job_id, sequence) since
// EventBridge delivers at least once.
export async function nextAnnouncement({
  sqs,
  queueUrl,
  jobId,
  deadline,
  longPollSeconds = MAX_LONG_POLL_SECONDS,
}) {
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return null;
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: Math.min(Math.ceil(left / 1000), longPollSeconds),
      }),
    );
    if (Messages.length) {
      await sqs.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
        }),
      );
    }
    for (const message of Messages) {
      const event = announcementOf(message.Body);
      if (event && event.detail.job_id === jobId) return event;
    }
  }
}

const USAGE =
  "usage: node integrate.mjs --job-id JOB --status-url URL [--metadata JSON] [--name NAME] " +
  "[--wait-seconds N] [--long-poll-seconds N] [--keep]   (bus: SUME_EVENT_BUS)";

function options(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      "job-id": { type: "string" },
      "status-url": { type: "string" },
      metadata: { type: "string" },
      name: { type: "string", default: `integrator-js-${randomUUID().slice(0, 8)}` },
      "wait-seconds": { type: "string", default: "120" },
      "long-poll-seconds": { type: "string", default: String(MAX_LONG_POLL_SECONDS) },
      keep: { type: "boolean", default: false },
    },
  });
  const bus = process.env.SUME_EVENT_BUS;
  const wait = Number(values["wait-seconds"]);
  const longPoll = Number(values["long-poll-seconds"]);
  const longPollOk =
    Number.isInteger(longPoll) && longPoll >= 1 && longPoll <= MAX_LONG_POLL_SECONDS;
  if (!bus || !values["job-id"] || !values["status-url"] || !(wait >= 0) || !longPollOk) {
    throw new Error(USAGE);
  }
  let metadata;
  try {
    metadata = values.metadata === undefined ? undefined : JSON.parse(values.metadata);
  } catch {
    throw new Error(`--metadata is not JSON: ${values.metadata.slice(0, 80)}`);
  }
  return {
    bus,
    jobId: values["job-id"],
    statusUrl: values["status-url"],
    metadata,
    name: values.name,
    waitSeconds: wait,
    longPollSeconds: longPoll,
    keep: values.keep,
  };
}

export async function main(argv) {
  let o;
  try {
    o = options(argv);
  } catch (error) {
    console.error(error.message);
    return 2;
  }
  const events = new EventBridgeClient({});
  const sqs = new SQSClient({});
  // Subscribe first: an announcement put before the rule exists reaches no one.
  const { queueUrl } = await subscribe({ events, sqs, bus: o.bus, name: o.name });
  console.error(`subscribed: rule ${o.name} on ${o.bus} -> ${queueUrl}`);
  let failure = null;
  try {
    const eventId = await register({ events, ...o });
    console.error(`registered ${o.jobId} (event ${eventId}); waiting ${o.waitSeconds} s`);
    const deadline = new Date(Date.now() + o.waitSeconds * 1000);
    const announcement = await nextAnnouncement({
      sqs,
      queueUrl,
      jobId: o.jobId,
      deadline,
      longPollSeconds: o.longPollSeconds,
    });
    if (announcement === null) {
      console.error(`no announcement of ${o.jobId} in ${o.waitSeconds} s`);
      return 1;
    }
    console.log(JSON.stringify(announcement));
    return 0;
  } catch (error) {
    failure = error;
    throw error;
  } finally {
    if (!o.keep) {
      try {
        await unsubscribe({ events, sqs, bus: o.bus, name: o.name, queueUrl });
      } catch (cleanup) {
        // What failed first is the cause; a cleanup failing after it must not hide it.
        if (failure === null) throw cleanup;
        console.error(
          `cleaning up ${o.name} failed too (${cleanup.name}: ${cleanup.message}); the cause:`,
        );
      }
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error) => {
      console.error(`${error.name}: ${error.message}`);
      process.exit(1);
    },
  );
}
