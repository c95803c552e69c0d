// An empty upload, and bodies the client refuses for a binary route.
console.log(JSON.stringify(await shop.putBlob("empty", new Uint8Array(0))));
for (const body of [{ not: "bytes" }, 42, null, [1, 2]]) {
  try {
    await shop.putBlob("bad", body);
    console.log("sent");
  } catch (e) {
    console.log(e.name, e.message.slice(0, 40));
  }
}
console.log(JSON.stringify(await shop.putBlob("str", "text as bytes é")));
