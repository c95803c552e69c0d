// The grant names one repository. The client in the sandbox refuses a comment anywhere
// else before it leaves; code that skips the client meets the broker, which refuses it too.
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
