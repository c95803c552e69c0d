// $response of a 204, a text reply and a binary reply: each body as the body form gives it.
const gone = await shop.$response.deleteItem("a1");
console.log(gone.status, JSON.stringify(gone.headers), JSON.stringify(gone.body), typeof gone.body);
const note = await shop.$response.getNote("n1");
console.log(note.status, typeof note.body, JSON.stringify(note.body));
const file = await shop.$response.download("n-5");
console.log(file.status, file.headers["content-type"], file.body instanceof Uint8Array, file.body.join());
const csv = await shop.$response.getReport("bom-2");
console.log(csv.body.charCodeAt(0), csv.headers["content-type"]);
