// A conditional read: 200 with an ETag, then a 304 with no body, which $response resolves.
const first = await shop.$response.getCatalog({ version: "v1" });
console.log(first.status, first.headers.etag, JSON.stringify(first.body));
const again = await shop.$response.getCatalog({ version: "current" });
console.log(again.status, again.headers.etag, JSON.stringify(again.body), typeof again.body);
try {
  await shop.getCatalog({ version: "current" });
} catch (e) {
  console.log(e.message);
}
