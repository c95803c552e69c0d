// A multipart upload whose file part's content is bytes, beside a text part.
const png = await shop.getImage("logo");
const r = await shop.uploadFile({ note: "logo", file: { filename: "logo.png", type: "image/png", content: png } });
console.log(JSON.stringify(r));
const s = await shop.uploadFile({ files: [{ filename: "a.bin", content: new Uint8Array([0, 255]) }, { filename: "b.txt", content: "hi" }] });
console.log(JSON.stringify(s));
