import { Module } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthGuard } from './auth.guard';
import { ApiToken } from './entities/api-token.entity';
import { User } from './entities/user.entity';
import { RateLimiterService } from './rate-limiter.service';
import { UsersController } from './users.controller';
import { UsersRepository } from './users.repository';
import { UsersService } from './users.service';

@Module({
  imports: [TypeOrmModule.forFeature([User, ApiToken])],
  controllers: [UsersController],
  providers: [UsersRepository, UsersService, RateLimiterService, { provide: APP_GUARD, useClass: AuthGuard }],
  exports: [UsersService],
})
export class UsersModule {}
