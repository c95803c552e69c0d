const content = String.fromCharCode(...new Uint8Array([97, 98, 99]));
const r = await shop.uploadFile({ file: { filename: "abc.txt", content, type: "text/plain" } });
console.log(JSON.stringify(r));
