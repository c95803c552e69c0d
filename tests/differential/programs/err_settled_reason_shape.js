const [r] = await Promise.allSettled([shop.getItem("missing-rs")]);
console.log(r.status, Object.keys(r).join(","), typeof r.reason.message);
