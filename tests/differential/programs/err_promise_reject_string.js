const r = await Promise.reject("plain").catch((x) => "got " + x);
console.log(r);
