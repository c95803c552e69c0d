// Invalid UTF-8 in a text reply, in the raw and the $response form: U+FFFD per subpart.
const r = await shop.$response.getNote("badbytes");
const codes = Array.from(r.body, (c) => c.codePointAt(0).toString(16));
console.log(r.body.length, codes.join(" "));
console.log(r.headers["content-type"]);
