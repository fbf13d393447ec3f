import { Global, Module } from '@nestjs/common';
import { ReadReplica } from './read-replica';
import { TransactionRunner } from './transaction.runner';

@Global()
@Module({ providers: [TransactionRunner, ReadReplica], exports: [TransactionRunner, ReadReplica] })
export class TransactionsModule {}
