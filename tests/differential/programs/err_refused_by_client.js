try {
  await shop.adminReset({ all: true });
} catch (e) {
  console.log(e.name, e.message);
}
