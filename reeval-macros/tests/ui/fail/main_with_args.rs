reeval::main!(x);
