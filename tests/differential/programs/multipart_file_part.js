const r = await shop.uploadFile({ file: { filename: "notes.txt", content: "line1\nline2\n", type: "text/plain" }, label: "x" });
console.log(r.kind, r.received > 0);
