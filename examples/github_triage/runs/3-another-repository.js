// The grant names one repository. A comment anywhere else is refused by the broker, which
// counts it, whether the call comes through the client or skips it.
try {
  await gh.issues_create_comment("acme", "billing", 1, {body: "Thanks for the report."});
  console.log("commented");
} catch (error) {
  console.log("client:", error.message);
}
const envelope = {method: "POST", route: "/repos/*/*/issues/*/comments",
                  values: ["acme", "billing", 1], body: {body: "Thanks for the report."}};
const reply = await globalThis.__coderunner_host_start(JSON.stringify(envelope));
console.log("broker:", reply.status, reply.body);
