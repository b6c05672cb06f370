// "My consumer was down": an application takes again the announcements it missed,
// from the bus's archive, replayed to its own rule only, each (job_id, sequence) once.
// The same code runs against a deployed stage and the local stack (AWS_* variables as
// for integrate.mjs; the archive from SUME_ANNOUNCEMENTS_ARCHIVE, the stack's output
// AnnouncementsArchiveName).
//
//   node catch-up.mjs --name RULE --since ISO_TIME [--until ISO_TIME] [--wait-seconds N]
//
// RULE is the application's rule (integrate.mjs names its queue the same). Prints each
// announcement it takes as one JSON line on stdout, what it does on stderr. Exit
// status: 0 the replay completed and its queue is drained, 1 it did not, 2 usage.

import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import {
  DescribeArchiveCommand,
  DescribeReplayCommand,
  DescribeRuleCommand,
  EventBridgeClient,
  StartReplayCommand,
} from "@aws-sdk/client-eventbridge";
import {
  DeleteMessageBatchCommand,
  GetQueueUrlCommand,
  ReceiveMessageCommand,
  SQSClient,
} from "@aws-sdk/client-sqs";
import { ANNOUNCEMENT_SOURCE } from "./integrate.mjs";

const FINAL = new Set(["COMPLETED", "CANCELLED", "FAILED"]);

// Start a replay of [since, until) from the archive to one rule of its bus: the
// other subscribers get nothing. Returns the replay's name.
export async function replayToRule({ events, archive, rule, since, until }) {
  const found = await events.send(new DescribeArchiveCommand({ ArchiveName: archive }));
  const busName = found.EventSourceArn.split("/").pop();
  const { Arn: ruleArn } = await events.send(
    new DescribeRuleCommand({ Name: rule, EventBusName: busName }),
  );
  const name = `${rule}-catch-up-${Date.now()}`.slice(-64);
  await events.send(
    new StartReplayCommand({
      ReplayName: name,
      EventSourceArn: found.ArchiveArn,
      EventStartTime: since,
      EventEndTime: until,
      Destination: { Arn: found.EventSourceArn, FilterArns: [ruleArn] },
    }),
  );
  return name;
}

export async function waitForReplay({ events, name, deadline }) {
  for (;;) {
    const { State, StateReason } = await events.send(
      new DescribeReplayCommand({ ReplayName: name }),
    );
    console.error(`replay ${name}: ${State}`);
    if (FINAL.has(State)) return { state: State, reason: StateReason };
    if (Date.now() > deadline) return { state: State, reason: "still running at the deadline" };
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// The consumer's own dedupe: EventBridge delivers at least once, and a replay sends
// again what the consumer may already have taken. A real consumer keeps the keys
// it worked in its database; a replayed copy carries "replay-name".
export function takeOnce(seen, event) {
  const key = `${event.detail.job_id}/${event.detail.sequence}`;
  if (seen.has(key)) return false;
  seen.add(key);
  return true;
}

export async function drain({ sqs, queueUrl, seen, take }) {
  for (;;) {
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    if (!Messages.length) return;
    for (const message of Messages) {
      const event = JSON.parse(message.Body);
      if (event.source === ANNOUNCEMENT_SOURCE && takeOnce(seen, event)) take(event);
    }
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: Messages.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
  }
}

function options(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      name: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
      "wait-seconds": { type: "string", default: "300" },
    },
  });
  const archive = process.env.SUME_ANNOUNCEMENTS_ARCHIVE;
  const since = new Date(values.since ?? "");
  const until = values.until === undefined ? new Date() : new Date(values.until);
  const wait = Number(values["wait-seconds"]);
  if (!archive || !values.name || Number.isNaN(+since) || Number.isNaN(+until) || !(wait > 0)) {
    throw new Error(
      "usage: node catch-up.mjs --name RULE --since ISO_TIME [--until ISO_TIME] " +
        "[--wait-seconds N]   (archive: SUME_ANNOUNCEMENTS_ARCHIVE)",
    );
  }
  return { archive, rule: values.name, since, until, waitSeconds: wait };
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
  const name = await replayToRule({ events, ...o });
  const deadline = Date.now() + o.waitSeconds * 1000;
  const { state, reason } = await waitForReplay({ events, name, deadline });
  const { QueueUrl: queueUrl } = await sqs.send(new GetQueueUrlCommand({ QueueName: o.rule }));
  let taken = 0;
  await drain({
    sqs,
    queueUrl,
    seen: new Set(),
    take: (event) => {
      taken += 1;
      console.log(JSON.stringify(event));
    },
  });
  console.error(`replay ${name} ${state}${reason ? ` (${reason})` : ""}; took ${taken}`);
  return state === "COMPLETED" ? 0 : 1;
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
