// A refusal has no upstream answer: $response rejects as the body form does.
for (const f of [() => shop.$response.listUsers({ org: "other" }), () => shop.$response.adminReset({})]) {
  try {
    const r = await f();
    console.log("resolved", r.status);
  } catch (e) {
    console.log("rejected", e.message.slice(0, 40));
  }
}
