try {
  await shop.getStats();
  undefinedVariable + 1;
} catch (e) {
  console.log(e.name);
}
